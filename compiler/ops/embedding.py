"""Embedding lookups, as `index_select` on the rows of the weight (so its gradient is
`index_select`'s: rows added back with index_add), and one-hot encodings (an index compared with
an iota over the classes)."""

from __future__ import annotations

from typing import Any

import torch

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

    padding_idx changes only the gradient, as in torch: the rows read at that index are a
    stop_gradient of themselves (same values), so the padding row of the weight gets no gradient.
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
    if padding_idx is not None:
        padding_idx = padding_idx + weight.shape[0] if padding_idx < 0 else padding_idx
        counted = prims.broadcast_in_dim(prims.ne(flat, padding_idx), list(rows.shape), [0])
        rows = prims.where(counted, rows, prims.stop_gradient(rows))
    return prims.reshape(rows, [*input.shape, weight.shape[1]]) if input.ndim != 1 else rows


@register("torch.nn.functional.one_hot")
def one_hot(tensor: TensorProxy, num_classes: int = -1) -> TensorProxy:
    """int64 one-hot rows over `num_classes` classes for an int64 index tensor (a new last dim).

    num_classes must be given: torch's default (-1) takes the largest index + 1, a shape that
    depends on the values. An index outside [0, num_classes) gives a row of zeros where eager
    raises (the compiled program does not read the values to check them)."""
    check(
        isinstance(tensor, TensorProxy) and tensor.dtype == torch.int64,
        lambda: (
            f"one_hot: expected an int64 index tensor, got {getattr(tensor, 'dtype', type(tensor).__name__)}"
            + called_at()
        ),
        TypeError,
    )
    check(
        not (isinstance(num_classes, int) and num_classes == -1),
        lambda: (
            "one_hot: num_classes=-1 (the largest index + 1) gives a shape that depends on the index values; "
            f"pass num_classes{called_at()}"
        ),
        NotImplementedError,
    )
    check(
        isinstance(num_classes, int) and num_classes >= 0,
        lambda: f"one_hot: num_classes must be a non-negative int, got {num_classes!r}{called_at()}",
        ValueError,
    )
    shape = [*tensor.shape, num_classes]
    rows = prims.broadcast_in_dim(tensor, shape, list(range(tensor.ndim)))
    classes = prims.broadcast_in_dim(prims.iota(num_classes, 0, 1, torch.int64, tensor.device), shape, [tensor.ndim])
    return prims.convert_element_type(prims.eq(rows, classes), torch.int64)
