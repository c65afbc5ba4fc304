"""Embedding lookups, as `index_select` on the rows of the weight (so its gradient is
`index_select`'s: rows added back with index_add)."""

from __future__ import annotations

from typing import Any

from compiler import prims
from compiler.core import dtypes
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy, size_product
from compiler.ops.registry import register


@register("torch.nn.functional.embedding")
def embedding(
    input: TensorProxy,
    weight: TensorProxy,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Any:
    """weight[input]: one row of `weight` per index, in the shape of `input` plus the row dim.

    padding_idx changes only the gradient in torch (that row gets none); here the forward is the
    same and that row's gradient is not zeroed (index_select's backward knows no padding row).
    """
    check(
        isinstance(input, TensorProxy) and dtypes.is_integer(input.dtype),
        lambda: f"embedding: indices must be an integer tensor, got {getattr(input, 'dtype', input)!r}{called_at()}",
        TypeError,
    )
    check(
        isinstance(weight, TensorProxy) and weight.ndim == 2,
        lambda: f"embedding: weight must be a 2-D tensor, got {getattr(weight, 'shape', weight)!r}{called_at()}",
        ValueError,
    )
    check(max_norm is None, lambda: f"embedding: max_norm is not supported{called_at()}", NotImplementedError)
    check(
        not scale_grad_by_freq and not sparse,
        lambda: f"embedding: scale_grad_by_freq and sparse are not supported{called_at()}",
        NotImplementedError,
    )
    flat = prims.reshape(input, [size_product(input.shape)]) if input.ndim != 1 else input
    rows = prims.index_select(weight, 0, flat)
    return prims.reshape(rows, [*input.shape, weight.shape[1]]) if input.ndim != 1 else rows
