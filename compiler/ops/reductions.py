"""Reductions: sum, prod, mean, logsumexp, var/std (and *_mean), amax/amin, max/min, argmax/argmin, any/all.

Dims follow torch: None (and, for most reductions, an empty list) means every dim, negative dims
count from the end, a dim listed twice is an error. `dtype=` converts the input before reducing.
Integer and bool sums and products give int64; bf16/f16 accumulate in float32 and round once;
mean/var/std need floating inputs. `keepdim` re-inserts the reduced dims as size-1 dims.

`reduce_dims`, `keep_dims`, `count` and `expand_reduced` are shared with the nn ops (softmax,
norms, losses), which decompose into the same prims.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from compiler import prims
from compiler.core import dtypes
from compiler.core.errors import called_at, check
from compiler.core.ir import NumberProxy, TensorProxy
from compiler.ops.elementwise import maximum, minimum
from compiler.ops.operands import canonical_dim, check_no_out, to_dtype
from compiler.ops.registry import register

# ---------------------------------------------------------------------------------------------
# Shared helpers


def reduce_dims(op: str, input: TensorProxy, dim: Any) -> tuple[int, ...]:
    """The sorted non-negative dims `dim` names (None or an empty sequence: every dim)."""
    if dim is None or (isinstance(dim, (tuple, list, torch.Size)) and len(dim) == 0):
        return tuple(range(input.ndim))
    items = list(dim) if isinstance(dim, (tuple, list, torch.Size)) else [dim]
    dims = [canonical_dim(d, input.ndim) for d in items]
    check(
        len(set(dims)) == len(dims),
        lambda: f"{op}: dim {tuple(items)} names a dim more than once (input rank {input.ndim}){called_at()}",
        RuntimeError,
    )
    # NOTE: a 0-d tensor accepts dim 0 / -1, which reduce nothing.
    return tuple(sorted(d for d in dims if d < input.ndim))


def keep_dims(out: TensorProxy, shape: Sequence, dims: Sequence[int]) -> TensorProxy:
    """`out` (reduced over `dims` of `shape`) with size-1 dims where the reduced dims were."""
    if not dims:
        return out
    target = [1 if i in dims else s for i, s in enumerate(shape)]
    return prims.broadcast_in_dim(out, target, [i for i in range(len(shape)) if i not in dims])


def expand_reduced(out: TensorProxy, shape: Sequence, dims: Sequence[int]) -> TensorProxy:
    """`out` (reduced over `dims`) broadcast back to the full `shape` (for x - mean and friends)."""
    if not dims:
        return out
    return prims.broadcast_in_dim(out, list(shape), [i for i in range(len(shape)) if i not in dims])


def stable_shift(x: TensorProxy, dims: Sequence[int]) -> TensorProxy:
    """max(x) over `dims` behind a stop-gradient: what softmax-like ops subtract so exp cannot overflow.

    Their results do not depend on the shift (its total gradient is zero), so autodiff must not
    differentiate the amax (an equality mask and two more reductions in the backward)."""
    return prims.stop_gradient(prims.amax(x, tuple(dims)))


def count(shape: Sequence, dims: Sequence[int]) -> Any:
    """How many elements a reduction over `dims` combines (an int, or a NumberProxy)."""
    result: Any = 1
    for d in dims:
        result = shape[d] if isinstance(result, int) and result == 1 else result * shape[d]
    return result


def _check_tensor(op: str, input: Any) -> None:
    check(
        isinstance(input, TensorProxy),
        lambda: f"{op}: expected a tensor, got {type(input).__name__} {input!r}{called_at()}",
        TypeError,
    )


def _in_accumulating_dtype(input: TensorProxy, dtype: Any) -> TensorProxy:
    """`input` in `dtype` when one is given, else integers and bools in int64 (torch's sum, prod and
    cumsum), floats as they are."""
    if dtype is not None:
        return to_dtype(input, dtype)
    if not dtypes.is_float(input.dtype) and not input.dtype.is_complex:
        return to_dtype(input, torch.int64)
    return input


def _accumulating(op: str, prim_fn: Callable, input: TensorProxy, dim: Any, keepdim: bool, dtype: Any) -> Any:
    """sum / prod: integers and bools accumulate in int64, low-precision floats in float32."""
    _check_tensor(op, input)
    input = _in_accumulating_dtype(input, dtype)
    dims = reduce_dims(op, input, dim)
    result_dtype = input.dtype
    out = prim_fn(to_dtype(input, dtypes.compute_dtype(result_dtype)), dims)
    out = to_dtype(out, result_dtype)
    return keep_dims(out, input.shape, dims) if keepdim else out


def _check_floating(op: str, dtype: torch.dtype) -> None:
    # NOTE: RuntimeError, as torch raises for mean/var/std of integer tensors.
    check(
        dtypes.is_float(dtype) or dtype.is_complex,
        lambda: (
            f"{op}: expected a floating point or complex input, got {dtype} (pass dtype= to compute in a "
            f"floating dtype){called_at()}"
        ),
        RuntimeError,
    )


# ---------------------------------------------------------------------------------------------
# sum, prod, mean


@register("torch.sum", "torch.Tensor.sum")
def sum(input: TensorProxy, dim: Any = None, keepdim: bool = False, *, dtype: Any = None, out: Any = None) -> Any:
    """torch.sum: ints and bools sum in int64, bf16/f16 in float32 (rounded once); `dtype=` converts first."""
    check_no_out("torch.sum", out)
    return _accumulating("sum", prims.sum, input, dim, keepdim, dtype)


@register("torch.prod", "torch.Tensor.prod")
def prod(input: TensorProxy, dim: Any = None, keepdim: bool = False, *, dtype: Any = None, out: Any = None) -> Any:
    """torch.prod over all elements or one dim, with sum's accumulation dtypes."""
    check_no_out("torch.prod", out)
    check(
        not isinstance(dim, (tuple, list)),
        lambda: f"prod: dim must be a single int, got {dim!r}{called_at()}",
        TypeError,
    )
    return _accumulating("prod", prims.prod, input, dim, keepdim, dtype)


def _mean(x: TensorProxy, dims: tuple[int, ...]) -> TensorProxy:
    """The mean over `dims` of `x` (already in its compute dtype), reduced shape."""
    return prims.div(prims.sum(x, dims), count(x.shape, dims))


@register("torch.mean", "torch.Tensor.mean")
def mean(input: TensorProxy, dim: Any = None, keepdim: bool = False, *, dtype: Any = None, out: Any = None) -> Any:
    """torch.mean of a floating tensor (or of any tensor with a floating `dtype=`)."""
    check_no_out("torch.mean", out)
    _check_tensor("mean", input)
    if dtype is not None:
        input = to_dtype(input, dtype)
    _check_floating("mean", input.dtype)
    dims = reduce_dims("mean", input, dim)
    result = to_dtype(_mean(to_dtype(input, dtypes.compute_dtype(input.dtype)), dims), input.dtype)
    return keep_dims(result, input.shape, dims) if keepdim else result


@register("torch.logsumexp", "torch.Tensor.logsumexp")
def logsumexp(input: TensorProxy, dim: Any, keepdim: bool = False, *, out: Any = None) -> Any:
    """log(sum(exp(x))) over `dim`: the max is subtracted first and added back (behind a
    stop-gradient; an infinite max shifts by 0, as eager); integers compute in the default float."""
    check_no_out("torch.logsumexp", out)
    _check_tensor("logsumexp", input)
    if not dtypes.is_float(input.dtype):
        input = to_dtype(input, torch.get_default_dtype())
    dims = reduce_dims("logsumexp", input, dim)
    x = to_dtype(input, dtypes.compute_dtype(input.dtype))
    if not dims:  # a 0-d input: the sum of one element (a copy of it)
        result = prims.sum(x, dims)
    elif isinstance(count(x.shape, dims), int) and count(x.shape, dims) == 0:  # amax rejects empty slices
        result = prims.log(prims.sum(prims.exp(x), dims))
    else:
        top = stable_shift(x, dims)
        top = prims.where(prims.eq(prims.abs(top), math.inf), 0.0, top)
        shifted = prims.sub(x, expand_reduced(top, x.shape, dims))
        result = prims.add(prims.log(prims.sum(prims.exp(shifted), dims)), top)
    result = to_dtype(result, input.dtype)
    return keep_dims(result, input.shape, dims) if keepdim else result


# ---------------------------------------------------------------------------------------------
# var, std, var_mean, std_mean


def _correction(op: str, dim: Any, unbiased: Any, correction: Any) -> tuple[Any, Any]:
    """(dim, correction) from torch's overloads: (dim, unbiased), (unbiased), (dim, correction=)."""
    if isinstance(dim, bool):  # torch.var(input, unbiased)
        check(unbiased is None, lambda: f"{op}: unbiased given twice{called_at()}", TypeError)
        dim, unbiased = None, dim
    check(
        unbiased is None or correction is None,
        lambda: f"{op}: pass either unbiased= or correction=, not both{called_at()}",
        TypeError,
    )
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    return dim, correction


def _var_and_mean(
    op: str, input: TensorProxy, dim: Any, unbiased: Any, keepdim: bool, correction: Any, *, with_mean: bool
) -> list[TensorProxy]:
    """[variance] or [variance, mean] in `input`'s dtype: the corrected mean square deviation."""
    _check_tensor(op, input)
    _check_floating(op, input.dtype)
    dim, correction = _correction(op, dim, unbiased, correction)
    dims = reduce_dims(op, input, dim)
    x = to_dtype(input, dtypes.compute_dtype(input.dtype))
    mean_ = _mean(x, dims)
    diff = prims.sub(x, expand_reduced(mean_, x.shape, dims))
    # NOTE: torch divides by max(0, N - correction): N <= correction gives inf or nan, never negative.
    denominator = prims.maximum(prims.sub(count(x.shape, dims), correction), 0)
    var_ = prims.div(prims.sum(prims.mul(diff, diff), dims), denominator)
    results = [var_, mean_] if with_mean else [var_]
    if op.startswith("std"):
        # NOTE: eager's std gradient is 0 where the std is 0 (constant values, one element with
        # correction 0), not the 0 * inf = NaN of differentiating sqrt there
        zero = prims.eq(var_, 0.0)
        results[0] = prims.where(zero, 0.0, prims.sqrt(prims.where(zero, 1.0, var_)))
    results = [to_dtype(r, input.dtype) for r in results]
    return [keep_dims(r, input.shape, dims) for r in results] if keepdim else results


@register("torch.var", "torch.Tensor.var")
def var(
    input: TensorProxy,
    dim: Any = None,
    unbiased: Any = None,
    keepdim: bool = False,
    *,
    correction: Any = None,
    out: Any = None,
) -> Any:
    """torch.var: the mean square deviation divided by max(0, N - correction) (default correction 1)."""
    check_no_out("torch.var", out)
    return _var_and_mean("var", input, dim, unbiased, keepdim, correction, with_mean=False)[0]


@register("torch.std", "torch.Tensor.std")
def std(
    input: TensorProxy,
    dim: Any = None,
    unbiased: Any = None,
    keepdim: bool = False,
    *,
    correction: Any = None,
    out: Any = None,
) -> Any:
    """torch.std: the square root of `var`."""
    check_no_out("torch.std", out)
    return _var_and_mean("std", input, dim, unbiased, keepdim, correction, with_mean=False)[0]


@register("torch.var_mean")
def var_mean(
    input: TensorProxy, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *, correction: Any = None
) -> tuple[TensorProxy, TensorProxy]:
    """torch.var_mean: (var, mean) computed together."""
    return tuple(_var_and_mean("var_mean", input, dim, unbiased, keepdim, correction, with_mean=True))


@register("torch.std_mean")
def std_mean(
    input: TensorProxy, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *, correction: Any = None
) -> tuple[TensorProxy, TensorProxy]:
    """torch.std_mean: (std, mean) computed together."""
    return tuple(_var_and_mean("std_mean", input, dim, unbiased, keepdim, correction, with_mean=True))


# ---------------------------------------------------------------------------------------------
# amax, amin, max, min, argmax, argmin


def _extremum(op: str, prim_fn: Callable, input: TensorProxy, dim: Any, keepdim: bool) -> TensorProxy:
    _check_tensor(op, input)
    dims = reduce_dims(op, input, dim)
    out = prim_fn(input, dims)
    return keep_dims(out, input.shape, dims) if keepdim else out


@register("torch.amax", "torch.Tensor.amax")
def amax(input: TensorProxy, dim: Any = (), keepdim: bool = False, *, out: Any = None) -> Any:
    """torch.amax over `dim` (every dim by default); NaN propagates."""
    check_no_out("torch.amax", out)
    return _extremum("amax", prims.amax, input, dim, keepdim)


@register("torch.aminmax", "torch.Tensor.aminmax")
def aminmax(input: TensorProxy, *, dim: Any = None, keepdim: bool = False, out: Any = None) -> Any:
    """(amin, amax) over `dim` (every element where None)."""
    check_no_out("torch.aminmax", out)
    dims = () if dim is None else dim
    return torch.return_types.aminmax((amin(input, dims, keepdim), amax(input, dims, keepdim)))


@register("torch.amin", "torch.Tensor.amin")
def amin(input: TensorProxy, dim: Any = (), keepdim: bool = False, *, out: Any = None) -> Any:
    """torch.amin over `dim` (every dim by default); NaN propagates."""
    check_no_out("torch.amin", out)
    return _extremum("amin", prims.amin, input, dim, keepdim)


def _arg_extremum(
    op: str, input: TensorProxy, dim: Any, keepdim: bool, flip: bool, allow_bool: bool = False
) -> TensorProxy:
    """argmax (or, with `flip`, argmin through argmax of an order-reversing map) of `input`."""
    _check_tensor(op, input)
    check(
        input.dtype != torch.bool or allow_bool,
        lambda: f"{op}: bool inputs are not supported (as in torch){called_at()}",
        TypeError,
    )
    if input.dtype == torch.bool:
        input = to_dtype(input, torch.uint8)
    if flip:
        # NOTE: ~x = -x - 1 reverses the order of integers without overflowing at the minimum;
        # -x keeps NaN a NaN, so argmin still reports the first NaN as torch does.
        input = prims.neg(input) if dtypes.is_float(input.dtype) else prims.bitwise_not(input)
    if dim is None:
        out = prims.argmax(input, None)
        return prims.reshape(out, [1] * input.ndim) if keepdim and input.ndim else out
    d = canonical_dim(dim, input.ndim)
    if input.ndim == 0:
        return prims.argmax(input, None)
    out = prims.argmax(input, d)
    return keep_dims(out, input.shape, (d,)) if keepdim else out


def _scan(op: str, scan: Callable, input: TensorProxy, dim: Any, dtype: Any, out: Any) -> TensorProxy:
    """`scan(x, d)` along `dim` of `input` in `dtype` (default: the input's, int64 for integers and
    bools); a 0-d tensor is scanned as one element and the result is a new tensor."""
    check_no_out(op, out)
    _check_tensor(op, input)
    d = canonical_dim(dim, input.ndim)
    x = _in_accumulating_dtype(input, dtype)
    if input.ndim == 0:
        return prims.reshape(scan(prims.reshape(x, [1]), 0), [])
    return scan(x, d)


@register("torch.cumsum", "torch.Tensor.cumsum")
def cumsum(input: TensorProxy, dim: Any, *, dtype: torch.dtype | None = None, out: Any = None) -> TensorProxy:
    """torch.cumsum: running sums along `dim`, in `dtype` (default: the input's, int64 for integers and bools)."""
    return _scan("torch.cumsum", lambda x, d: prims.cumsum(x, d, False), input, dim, dtype, out)


@register("torch.cumprod", "torch.Tensor.cumprod")
def cumprod(input: TensorProxy, dim: Any, *, dtype: torch.dtype | None = None, out: Any = None) -> TensorProxy:
    """torch.cumprod: running products along `dim`, in `dtype` (default: the input's, int64 for integers and bools)."""
    return _scan("torch.cumprod", prims.cumprod, input, dim, dtype, out)


@register("torch.argmax", "torch.Tensor.argmax")
def argmax(input: TensorProxy, dim: Any = None, keepdim: bool = False, *, out: Any = None) -> Any:
    """torch.argmax: the first index of the maximum (NaN counts as the maximum), over all or one dim."""
    check_no_out("torch.argmax", out)
    return _arg_extremum("argmax", input, dim, keepdim, flip=False)


@register("torch.argmin", "torch.Tensor.argmin")
def argmin(input: TensorProxy, dim: Any = None, keepdim: bool = False, *, out: Any = None) -> Any:
    """torch.argmin: argmax of an order-reversing map of the input (-x, or ~x for integers)."""
    check_no_out("torch.argmin", out)
    return _arg_extremum("argmin", input, dim, keepdim, flip=True)


def _max_or_min(op: str, input: TensorProxy, dim: Any, keepdim: bool, out: Any) -> Any:
    """torch.max / torch.min: the overall extremum, (values, indices) along a dim, or elementwise."""
    check_no_out(f"torch.{op}", out)
    is_max = op == "max"
    if isinstance(dim, TensorProxy):  # torch.max(input, other)
        return (maximum if is_max else minimum)(input, dim)
    if dim is None:
        check(not keepdim, lambda: f"torch.{op}: keepdim needs a dim{called_at()}", TypeError)
        return _extremum(op, prims.amax if is_max else prims.amin, input, None, False)
    check(
        isinstance(dim, (int, NumberProxy)),
        lambda: f"torch.{op}: dim must be an int, got {type(dim).__name__} {dim!r}{called_at()}",
        TypeError,
    )
    # NOTE: torch.max/min along a dim accept bool tensors, unlike argmax/argmin.
    if input.ndim and dtypes.is_float(input.dtype):
        # NOTE: the values are taken at the indices, so that their gradient goes to that one
        # element, as eager's does; amax's would be shared among tied elements.
        d = canonical_dim(dim, input.ndim)
        indices = _arg_extremum(op, input, d, True, flip=not is_max)
        values = prims.take_along_dim(input, indices, d)
        if not keepdim:
            values, indices = prims.squeeze(values, [d]), prims.squeeze(indices, [d])
        result_type = torch.return_types.max if is_max else torch.return_types.min
        return result_type((values, indices))
    values = _extremum(op, prims.amax if is_max else prims.amin, input, dim, keepdim)
    indices = _arg_extremum(op, input, dim, keepdim, flip=not is_max, allow_bool=True)
    result_type = torch.return_types.max if is_max else torch.return_types.min
    return result_type((values, indices))


@register("torch.max", "torch.Tensor.max")
def max(input: TensorProxy, dim: Any = None, keepdim: bool = False, *, out: Any = None) -> Any:
    """torch.max: the maximum, (values, indices) along `dim`, or torch.maximum when `dim` is a tensor."""
    return _max_or_min("max", input, dim, keepdim, out)


@register("torch.min", "torch.Tensor.min")
def min(input: TensorProxy, dim: Any = None, keepdim: bool = False, *, out: Any = None) -> Any:
    """torch.min: the minimum, (values, indices) along `dim`, or torch.minimum when `dim` is a tensor."""
    return _max_or_min("min", input, dim, keepdim, out)


# ---------------------------------------------------------------------------------------------
# any, all


def _logical_reduction(op: str, prim_fn: Callable, input: TensorProxy, dim: Any, keepdim: bool) -> Any:
    _check_tensor(op, input)
    truth = input if input.dtype == torch.bool else prims.ne(input, 0)
    dims = reduce_dims(op, truth, dim)
    if builtins.any(type(truth.shape[d]) is int and truth.shape[d] == 0 for d in dims):  # amax rejects empty slices
        # NOTE: over no elements, any is False and all is True (symbolic sizes are at least 2).
        kept = [s for i, s in enumerate(truth.shape) if i not in dims]
        out = prims.full(kept, op == "all", torch.bool, truth.device)
        out = keep_dims(out, truth.shape, dims) if keepdim else out
    else:
        out = _extremum(op, prim_fn, truth, dim, keepdim)
    # NOTE: torch keeps uint8 for uint8 inputs (a legacy of masks stored as bytes); bool otherwise.
    return to_dtype(out, torch.uint8) if input.dtype == torch.uint8 else out


@register("torch.any", "torch.Tensor.any")
def any(input: TensorProxy, dim: Any = None, keepdim: bool = False, *, out: Any = None) -> Any:
    """torch.any: whether some element is nonzero, over all or the given dims."""
    check_no_out("torch.any", out)
    return _logical_reduction("any", prims.amax, input, dim, keepdim)


@register("torch.all", "torch.Tensor.all")
def all(input: TensorProxy, dim: Any = None, keepdim: bool = False, *, out: Any = None) -> Any:
    """torch.all: whether every element is nonzero, over all or the given dims."""
    check_no_out("torch.all", out)
    return _logical_reduction("all", prims.amin, input, dim, keepdim)
