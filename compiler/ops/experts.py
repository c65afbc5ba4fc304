"""Ops a mixture of experts' routing reaches: torch.histc (tokens per expert) and
torch._grouped_mm (every expert's GEMM over its rows, what `F.grouped_mm` calls).

histc puts each value in a bin as torch's kernels do, `(x - min) * bins / (max - min)` truncated
(in the input's dtype; integer inputs in integer arithmetic), the value `max` in the last bin and
values outside [min, max] (and NaN) in none: no shape depends on the values. With few bins (a
router's experts) each bin's count is a sum of comparisons, which fuses with the binning; with many,
an index_add of ones into one bin per value (values outside into an extra bin, dropped after).
"""

from __future__ import annotations

from typing import Any

import torch

from compiler import prims
from compiler.core import dtypes
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy
from compiler.ops.embedding import one_hot
from compiler.ops.operands import Promotion, elementwise, to_dtype
from compiler.ops.registry import register, register_custom

_COMPARED_BINS = 1 << 22  # values x bins up to this: counted by comparisons (see the module)


@register("torch.histc", "torch.Tensor.histc")
def histc(input: TensorProxy, bins: int = 100, min: Any = 0, max: Any = 0, *, out: Any = None) -> TensorProxy:
    """torch.histc with explicit bounds (min < max); the counts in the input's dtype."""
    check(out is None, lambda: f"torch.histc: out= is not supported{called_at()}", NotImplementedError)
    check(
        isinstance(bins, int) and bins > 0,
        lambda: f"torch.histc: bins must be a positive int, got {bins!r}{called_at()}",
        ValueError,
    )
    check(
        isinstance(min, (int, float)) and isinstance(max, (int, float)) and min < max,
        lambda: (
            f"torch.histc: min={min!r}, max={max!r}: only fixed bounds with min < max are supported (equal bounds "
            f"take the data's range, which needs its values){called_at()}"
        ),
        NotImplementedError,
    )
    values = prims.reshape(input, [input.numel()]) if input.ndim != 1 else input
    if dtypes.is_integer(input.dtype):
        shifted = elementwise(prims.mul, elementwise(prims.sub, values, int(min)), bins)
        position = elementwise(prims.floor_divide, shifted, int(max) - int(min))
    else:
        scaled = elementwise(prims.div, elementwise(prims.mul, elementwise(prims.sub, values, min), bins), max - min)
        position = prims.trunc(scaled)
    position = to_dtype(position, torch.int64)
    position = elementwise(prims.minimum, position, bins - 1)  # the value max itself
    inside = elementwise(
        prims.bitwise_and,
        elementwise(prims.ge, values, min, promotion=Promotion.ALWAYS_BOOL),
        elementwise(prims.le, values, max, promotion=Promotion.ALWAYS_BOOL),
    )
    bin_index = prims.where(inside, position, bins)
    count = values.shape[0]
    if isinstance(count, int) and count * bins <= _COMPARED_BINS:
        hits = one_hot(bin_index, bins)  # int64 (exact counts in any dtype); the extra bin: a row of zeros
        return to_dtype(prims.sum(hits, [0]), input.dtype)
    ones = prims.full([count], 1, input.dtype, input.device)
    counts = prims.index_add(prims.full([bins + 1], 0, input.dtype, input.device), 0, bin_index, ones)
    return prims.slice(counts, [0], [bins], [1])


@register("torch._grouped_mm")
def grouped_mm(
    mat_a: TensorProxy, mat_b: TensorProxy, offs: Any = None, bias: Any = None, out_dtype: Any = None
) -> TensorProxy:
    """torch._grouped_mm: 2-d x 3-d and 2-d x 2-d with offsets (prims.grouped_mm), 3-d x 3-d without
    (a batched matmul)."""
    check(bias is None, lambda: f"torch._grouped_mm: bias is not supported{called_at()}", NotImplementedError)
    check(
        out_dtype in (None, mat_a.dtype),
        lambda: f"torch._grouped_mm: out_dtype={out_dtype} other than the operands' is not supported{called_at()}",
        NotImplementedError,
    )
    if offs is None:
        check(
            mat_a.ndim == 3 and mat_b.ndim == 3,
            lambda: (
                f"torch._grouped_mm: without offs both operands must be 3-d, got {mat_a.ndim}-d and "
                f"{mat_b.ndim}-d{called_at()}"
            ),
            NotImplementedError,
        )
        return prims.matmul(mat_a, mat_b)
    check(
        mat_a.ndim == 2 and mat_b.ndim in (2, 3),
        lambda: (
            f"torch._grouped_mm: with offs, a 2-d first operand and a 2-d or 3-d second one are supported, got "
            f"{mat_a.ndim}-d and {mat_b.ndim}-d{called_at()}"
        ),
        NotImplementedError,
    )
    return prims.grouped_mm(mat_a, mat_b, offs)


@register_custom("transformers::grouped_mm_fallback")
def transformers_grouped_mm(input: TensorProxy, weight: TensorProxy, offs: TensorProxy) -> TensorProxy:
    """transformers' grouped_mm_fallback (what its experts call where `torch._grouped_mm` is not
    used, under compilation in float32 among others): rows [offs[i-1], offs[i]) times weight[i],
    rows past the last offset zero, with a zero gradient."""
    rows = prims.iota(input.shape[0], 0, 1, offs.dtype, input.device)
    last = prims.broadcast_in_dim(prims.slice(offs, [offs.shape[0] - 1], [offs.shape[0]], [1]), [input.shape[0]], [0])
    covered = prims.lt(rows, last)
    # NOTE: the rows past the last offset are masked going in too, so that their gradient is zero
    # as well (grouped_mm leaves those rows of its results unwritten)
    input = prims.where(prims.broadcast_in_dim(covered, list(input.shape), [0]), input, 0.0)
    product = grouped_mm(input, weight, offs)
    return prims.where(prims.broadcast_in_dim(covered, list(product.shape), [0]), product, 0.0)
