"""Orderings: sort, argsort, topk, msort, kthvalue, median.

Each computes int64 indices with a prim that torch runs (`prims.argsort`, `prims.topk`: nvFuser
has no sort) and takes the values with `take_along_dim` of the input, so the values are the
input's own elements, their gradient is the gather's, and a fusion can read them from the input.
A 0-d input is sorted as one element: the value itself and index 0, as torch gives.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from compiler import prims
from compiler.core.errors import called_at, check
from compiler.core.ir import NumberProxy, TensorProxy
from compiler.ops.operands import canonical_dim, check_no_out
from compiler.ops.registry import register


def _check_input(op: str, input: Any) -> None:
    check(
        isinstance(input, TensorProxy),
        lambda: f"{op}: expected a tensor, got {type(input).__name__} {input!r}{called_at()}",
        TypeError,
    )
    check(
        not input.dtype.is_complex,
        lambda: f"{op}: complex tensors have no order (got {input.dtype}){called_at()}",
        TypeError,
    )


def _indices_and_values(input: TensorProxy, dim: Any, indices_of: Callable) -> tuple[TensorProxy, TensorProxy]:
    """(values, indices) along `dim` from `indices_of(x, d)`, a 0-d input seen as one element."""
    d = canonical_dim(dim, input.ndim)
    x = prims.reshape(input, [1]) if input.ndim == 0 else input
    indices = indices_of(x, d)
    values = prims.take_along_dim(x, indices, d)
    if input.ndim == 0:
        values, indices = prims.reshape(values, []), prims.reshape(indices, [])
    return values, indices


@register("torch.sort", "torch.Tensor.sort")
def sort(
    input: TensorProxy, dim: Any = -1, descending: bool = False, stable: bool | None = False, *, out: Any = None
) -> Any:
    """torch.sort: (values, indices) along `dim`; NaN sorts above every number."""
    check_no_out("torch.sort", out)
    _check_input("torch.sort", input)
    stable = bool(stable)  # NOTE: torch takes stable=None as False
    pair = _indices_and_values(input, dim, lambda x, d: prims.argsort(x, d, bool(descending), stable))
    return torch.return_types.sort(pair)


@register("torch.argsort", "torch.Tensor.argsort")
def argsort(input: TensorProxy, dim: Any = -1, descending: bool = False, stable: bool = False) -> TensorProxy:
    """torch.argsort: the indices that sort `input` along `dim`."""
    _check_input("torch.argsort", input)
    return sort(input, dim, descending, stable).indices


@register("torch.msort", "torch.Tensor.msort")
def msort(input: TensorProxy, *, out: Any = None) -> TensorProxy:
    """torch.msort: the values sorted along dim 0."""
    check_no_out("torch.msort", out)
    return sort(input, 0).values


@register("torch.topk", "torch.Tensor.topk")
def topk(
    input: TensorProxy, k: Any, dim: Any = -1, largest: bool = True, sorted: bool = True, *, out: Any = None
) -> Any:
    """torch.topk: (values, indices) of the k largest (or smallest) elements along `dim`."""
    check_no_out("torch.topk", out)
    _check_input("torch.topk", input)
    check(
        (isinstance(k, int) and not isinstance(k, bool)) or (isinstance(k, NumberProxy) and k.python_type is int),
        lambda: f"torch.topk: k must be an int, got {type(k).__name__} {k!r}{called_at()}",
        TypeError,
    )
    d = canonical_dim(dim, input.ndim)
    size = 1 if input.ndim == 0 else input.shape[d]
    if isinstance(k, int) and isinstance(size, int):
        check(
            0 <= k <= size,
            lambda: (
                f"torch.topk: k={k} is out of range for dim {d} of size {size} (expected 0 <= k <= {size})"
                + called_at()
            ),
            IndexError,
        )
    pair = _indices_and_values(input, d, lambda x, dd: prims.topk(x, k, dd, bool(largest), bool(sorted)))
    return torch.return_types.topk(pair)


def _kth_smallest(op: str, input: TensorProxy, k: int, dim: Any, keepdim: bool) -> tuple[TensorProxy, TensorProxy]:
    """(values, indices) of the k-th smallest element (1-based) along `dim`, from a stable sort."""
    _check_input(op, input)
    d = canonical_dim(dim, input.ndim)
    x = prims.reshape(input, [1]) if input.ndim == 0 else input
    size = int(x.shape[d])
    check(1 <= k <= size, lambda: f"{op}: k={k} is out of range for dim {d} of size {size}{called_at()}", IndexError)
    order = prims.argsort(x, d, False, True)
    starts, ends = [0] * x.ndim, list(x.shape)
    starts[d], ends[d] = k - 1, k
    indices = prims.slice(order, starts, ends, [1] * x.ndim)
    values = prims.take_along_dim(x, indices, d)
    if input.ndim == 0:
        return prims.reshape(values, []), prims.reshape(indices, [])
    if not keepdim:
        values, indices = prims.squeeze(values, [d]), prims.squeeze(indices, [d])
    return values, indices


@register("torch.kthvalue", "torch.Tensor.kthvalue")
def kthvalue(input: TensorProxy, k: int, dim: Any = -1, keepdim: bool = False, *, out: Any = None) -> Any:
    """torch.kthvalue: (values, indices) of the k-th smallest element along `dim`."""
    check_no_out("torch.kthvalue", out)
    return torch.return_types.kthvalue(_kth_smallest("torch.kthvalue", input, int(k), dim, keepdim))


@register("torch.median", "torch.Tensor.median")
def median(input: TensorProxy, dim: Any = None, keepdim: bool = False, *, out: Any = None) -> Any:
    """torch.median: the lower of the two middle values; (values, indices) along `dim` when given."""
    check_no_out("torch.median", out)
    if dim is None:
        flat = prims.reshape(input, [int(input.numel())]) if input.ndim != 1 else input
        value = _kth_smallest("torch.median", flat, (int(flat.shape[0]) + 1) // 2, 0, False)[0]
        if not input.dtype.is_floating_point:
            return value
        # NOTE: eager shares the gradient of the overall median among the elements equal to it
        # (as amax's): the amax of those elements, the value itself where it is NaN.
        value = prims.stop_gradient(value)
        ties = prims.where(prims.eq(flat, prims.broadcast_in_dim(value, list(flat.shape), [])), flat, float("-inf"))
        return prims.where(prims.ne(value, value), value, prims.amax(ties, (0,)))
    d = canonical_dim(dim, input.ndim)
    size = 1 if input.ndim == 0 else int(input.shape[d])
    return torch.return_types.median(_kth_smallest("torch.median", input, (size + 1) // 2, d, keepdim))
