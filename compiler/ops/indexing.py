"""Indexing ops with index tensors: index_select, index_copy (functional), gather."""

from __future__ import annotations

from typing import Any

import torch

from compiler import prims
from compiler.core import dtypes
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy
from compiler.ops.operands import canonical_dim, insert_dim, to_dtype
from compiler.ops.registry import register


def _check_index(op: str, index: Any) -> None:
    check(
        isinstance(index, TensorProxy) and index.ndim <= 1 and dtypes.is_integer(index.dtype),
        lambda: f"{op}: index must be a 0-D or 1-D integer tensor, got {index!r}{called_at()}",
        TypeError,
    )


def _as_1d(index: TensorProxy) -> TensorProxy:
    return index if index.ndim == 1 else prims.reshape(index, [1])


@register("torch.index_select", "torch.Tensor.index_select")
def index_select(input: TensorProxy, dim: int, index: TensorProxy, *, out: Any = None) -> Any:
    check(out is None, lambda: f"torch.index_select: out= is not supported{called_at()}", NotImplementedError)
    _check_index("index_select", index)
    d = canonical_dim(dim, input.ndim)
    if input.ndim == 0:
        return prims.reshape(prims.index_select(prims.reshape(input, [1]), 0, _as_1d(index)), [])
    return prims.index_select(input, d, _as_1d(index))


@register("torch.index_copy", "torch.Tensor.index_copy")
def index_copy(input: TensorProxy, dim: int, index: TensorProxy, source: TensorProxy) -> Any:
    _check_index("index_copy", index)
    d = canonical_dim(dim, input.ndim)
    check(
        source.dtype == input.dtype,
        lambda: f"index_copy: source is {source.dtype} but self is {input.dtype}; they must match{called_at()}",
        TypeError,
    )
    if index.ndim == 0 and source.ndim == input.ndim - 1:
        source = insert_dim(source, d)
    return prims.index_copy(input, d, _as_1d(index), source)


@register("torch.gather", "torch.Tensor.gather")
def gather(input: TensorProxy, dim: int, index: TensorProxy, *, sparse_grad: bool = False, out: Any = None) -> Any:
    check(out is None, lambda: f"torch.gather: out= is not supported{called_at()}", NotImplementedError)
    check(
        isinstance(index, TensorProxy) and dtypes.is_integer(index.dtype) and max(index.ndim, 1) == max(input.ndim, 1),
        lambda: (
            f"gather: index must be an integer tensor of the input's rank {input.ndim}, got "
            f"{getattr(index, 'dtype', type(index).__name__)}{list(getattr(index, 'shape', []))}{called_at()}"
        ),
        TypeError,
    )
    d = canonical_dim(dim, input.ndim)
    # NOTE: torch treats 0-d operands of gather as 1-D with one element.
    source = prims.reshape(input, [1]) if input.ndim == 0 else input
    positions = prims.reshape(index, [1]) if index.ndim == 0 else index
    out = prims.take_along_dim(source, to_dtype(positions, torch.int64), d)
    return prims.reshape(out, []) if index.ndim == 0 else out
