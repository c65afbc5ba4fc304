"""Running reductions without a prim of their own, and counting: cummax, cummin, logcumsumexp
and bincount.

cummax / cummin and logcumsumexp are log-depth prefix scans (`_prefix_scan`): step k combines each
position with the one 2**k before it, ceil(log2(n)) steps of elementwise prims that a fusion can
run. cummax's combine keeps the later of two (value, index) pairs when its value is >= the
earlier's (<= for cummin), NaN above every number, which is eager's running update (ties and NaN
report the latest index); the values are then gathered at those indices, so their gradient is the
gather's, as eager's. logcumsumexp combines with logaddexp shifted by the larger operand held
constant for autodiff, so its gradient is the softmax weights even at ties, and its terms never
overflow or underflow as one shift by the overall maximum would.

bincount's result has max(input) + 1 bins, a size only the values give; a trace has none, so
bincount is refused unless `minlength` is given, which the trace takes as the number of bins (the
usual use: counting tokens per expert, all below the expert count). A value at or above `minlength`
would make eager's result longer; here it is an index out of range, an error at run time, never
a silently shorter count.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from compiler import prims
from compiler.core import dtypes
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy
from compiler.ops.aliasing import fresh_copy
from compiler.ops.operands import canonical_dim, check_no_out, to_dtype
from compiler.ops.registry import register

Combine = Callable[[tuple[TensorProxy, ...], tuple[TensorProxy, ...]], tuple[TensorProxy, ...]]


def _prefix_scan(values: tuple[TensorProxy, ...], dim: int, combine: Combine) -> tuple[TensorProxy, ...]:
    """The inclusive scan of `values` (same shapes) along `dim` with an associative `combine(earlier,
    later)`, in ceil(log2(n)) steps (Hillis and Steele)."""
    length = int(values[0].shape[dim])
    if length <= 1:  # NOTE: nothing to combine; the result is still new memory, as eager's
        return tuple(fresh_copy(v) for v in values)
    shape = list(values[0].shape)
    step = 1
    while step < length:

        def part(t: TensorProxy, start: int, stop: int) -> TensorProxy:
            starts, stops = [0] * len(shape), list(shape)
            starts[dim], stops[dim] = start, stop
            return prims.slice(t, starts, stops, [1] * len(shape))

        earlier = tuple(part(v, 0, length - step) for v in values)
        later = tuple(part(v, step, length) for v in values)
        combined = combine(earlier, later)
        values = tuple(prims.cat([part(v, 0, step), c], dim) for v, c in zip(values, combined))
        step *= 2
    return values


def _scan_input(op: str, input: Any, dim: Any) -> tuple[TensorProxy, int]:
    check(
        isinstance(input, TensorProxy),
        lambda: f"{op}: expected a tensor, got {type(input).__name__} {input!r}{called_at()}",
        TypeError,
    )
    d = canonical_dim(dim, input.ndim)
    return (prims.reshape(input, [1]) if input.ndim == 0 else input), d


def _running_extremum(op: str, input: TensorProxy, dim: Any, later_wins: Callable) -> Any:
    x, d = _scan_input(op, input, dim)
    check(not x.dtype.is_complex, lambda: f"{op}: complex tensors have no order{called_at()}", TypeError)
    keys = to_dtype(x, torch.int64) if x.dtype == torch.bool else x
    positions = prims.broadcast_in_dim(prims.iota(x.shape[d], 0, 1, torch.int64, x.device), list(x.shape), [d])
    floats = dtypes.is_float(keys.dtype)

    def combine(earlier: tuple, later: tuple) -> tuple:
        (value_a, index_a), (value_b, index_b) = earlier, later
        take_later = later_wins(value_b, value_a)
        if floats:  # NOTE: NaN beats every number, and a later NaN beats an earlier one
            take_later = prims.bitwise_or(
                prims.ne(value_b, value_b), prims.bitwise_and(prims.eq(value_a, value_a), take_later)
            )
        return prims.where(take_later, value_b, value_a), prims.where(take_later, index_b, index_a)

    _, indices = _prefix_scan((prims.stop_gradient(keys), positions), d, combine)
    values = prims.take_along_dim(x, indices, d)
    if input.ndim == 0:
        values, indices = prims.reshape(values, []), prims.reshape(indices, [])
    return values, indices


@register("torch.cummax", "torch.Tensor.cummax")
def cummax(input: TensorProxy, dim: Any, *, out: Any = None) -> Any:
    """(values, indices): the running maximum along `dim` and where it was (the latest on ties)."""
    check_no_out("torch.cummax", out)
    return torch.return_types.cummax(_running_extremum("torch.cummax", input, dim, prims.ge))


@register("torch.cummin", "torch.Tensor.cummin")
def cummin(input: TensorProxy, dim: Any, *, out: Any = None) -> Any:
    """(values, indices): the running minimum along `dim` and where it was (the latest on ties)."""
    check_no_out("torch.cummin", out)
    return torch.return_types.cummin(_running_extremum("torch.cummin", input, dim, prims.le))


def _logaddexp(earlier: tuple, later: tuple) -> tuple:
    (a,), (b,) = earlier, later
    shift = prims.stop_gradient(prims.maximum(a, b))
    # NOTE: both -inf (or an inf) shift by 0: a - shift would be NaN
    shift = prims.where(prims.eq(prims.abs(shift), float("inf")), 0.0, shift)
    total = prims.add(prims.exp(prims.sub(a, shift)), prims.exp(prims.sub(b, shift)))
    return (prims.add(prims.log(total), shift),)


@register("torch.logcumsumexp", "torch.Tensor.logcumsumexp")
def logcumsumexp(input: TensorProxy, dim: Any, *, out: Any = None) -> TensorProxy:
    """log(cumsum(exp(input))) along `dim`, without overflow or underflow (floats only, as eager)."""
    check_no_out("torch.logcumsumexp", out)
    x, d = _scan_input("torch.logcumsumexp", input, dim)
    check(
        dtypes.is_float(x.dtype),
        lambda: f"torch.logcumsumexp: expected a floating point tensor, got {x.dtype}{called_at()}",
        RuntimeError,
    )
    compute = dtypes.compute_dtype(x.dtype)
    (result,) = _prefix_scan((to_dtype(x, compute),), d, _logaddexp)
    result = to_dtype(result, x.dtype)
    return prims.reshape(result, []) if input.ndim == 0 else result


@register("torch.bincount", "torch.Tensor.bincount")
def bincount(input: TensorProxy, weights: Any = None, minlength: int = 0) -> TensorProxy:
    """How often each value 0..minlength-1 occurs in a 1-d non-negative integer tensor (the sum of
    `weights` at those positions where given); `minlength` is required (see the module doc)."""
    check(
        isinstance(input, TensorProxy) and input.ndim == 1 and dtypes.is_integer(input.dtype),
        lambda: f"torch.bincount: expected a 1-d integer tensor, got {input!r}{called_at()}",
        RuntimeError,
    )
    check(
        isinstance(minlength, int) and minlength > 0,
        lambda: (
            "torch.bincount: its result's length is max(input) + 1, known only from the values; pass minlength= "
            f"the number of bins (every value must be below it){called_at()}"
        ),
        NotImplementedError,
    )
    if weights is None:
        contributions = prims.full(list(input.shape), 1, torch.int64, input.device)
    else:
        check(
            isinstance(weights, TensorProxy) and list(weights.shape) == list(input.shape),
            lambda: f"torch.bincount: weights must be a tensor of the input's shape {list(input.shape)}{called_at()}",
            RuntimeError,
        )
        # NOTE: eager sums float weights in float64 except float32 weights, which stay float32
        contributions = to_dtype(weights, torch.float32 if weights.dtype == torch.float32 else torch.float64)
    zeros = prims.full([minlength], 0, contributions.dtype, input.device)
    return prims.index_add(zeros, 0, to_dtype(input, torch.int64), contributions)
