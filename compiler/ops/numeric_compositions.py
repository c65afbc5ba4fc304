"""Elementwise ops written with other prims: round (half to even, with `decimals`), frac, copysign,
isclose, nansum, signbit, float_power, heaviside, fmax / fmin, sinc, and the tests isinf / isfinite /
isposinf / isneginf.

round has no prim: with f = floor(x), x - f is exact in floating point, so comparing it with 0.5
decides the rounding without the error that floor(x + 0.5) makes just below a half; ties go to
the even neighbour (f, or f + 1 when f is odd: f + remainder(f, 2)).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from compiler import prims
from compiler.core import dtypes
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy
from compiler.ops.aliasing import fresh_copy
from compiler.ops.operands import Promotion, check_no_out, elementwise, to_dtype
from compiler.ops.reductions import sum as sum_op
from compiler.ops.registry import register


def _round_half_even(x: TensorProxy) -> TensorProxy:
    floor = prims.floor(x)
    fraction = prims.sub(x, floor)
    tie = prims.add(floor, prims.remainder(floor, 2.0))
    up = prims.add(floor, 1.0)
    return prims.where(prims.gt(fraction, 0.5), up, prims.where(prims.lt(fraction, 0.5), floor, tie))


@register("torch.round", "torch.Tensor.round")
def round(input: TensorProxy, *, decimals: int = 0, out: Any = None) -> TensorProxy:
    """torch.round: to the nearest integer, ties to even; with `decimals`, at that decimal place."""
    check_no_out("torch.round", out)
    if not dtypes.is_float(input.dtype):
        check(decimals == 0, lambda: f"round: decimals needs a float tensor, got {input.dtype}{called_at()}", TypeError)
        return fresh_copy(input)
    if decimals == 0:
        return elementwise(_round_half_even, input)
    scale = 10.0 ** abs(decimals)
    if decimals > 0:
        return elementwise(lambda x: prims.div(_round_half_even(prims.mul(x, scale)), scale), input)
    return elementwise(lambda x: prims.mul(_round_half_even(prims.div(x, scale)), scale), input)


@register("torch.copysign", "torch.Tensor.copysign")
def copysign(input: Any, other: Any, *, out: Any = None) -> TensorProxy:
    """|input| with the sign of `other` (-0.0 counts as negative: 1 / -0.0 is -inf)."""
    check_no_out("torch.copysign", out)

    def magnitude_with_sign(a: Any, b: Any) -> Any:
        negative = prims.lt(prims.div(1.0, b), 0) if isinstance(b, TensorProxy) else math.copysign(1.0, b) < 0
        magnitude = prims.abs(a)
        if isinstance(negative, bool):
            return prims.neg(magnitude) if negative else magnitude
        return prims.where(negative, prims.neg(magnitude), magnitude)

    return elementwise(magnitude_with_sign, input, other, promotion=Promotion.INT_TO_FLOAT)


@register("torch.isclose", "torch.Tensor.isclose")
def isclose(
    input: TensorProxy, other: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
) -> TensorProxy:
    """|input - other| <= atol + rtol * |other| (equal values, infinities included, are close)."""

    def close(a: Any, b: Any) -> Any:
        equal = prims.eq(a, b)
        if not (dtypes.is_float(a.dtype) if isinstance(a, TensorProxy) else isinstance(a, float)):
            return equal
        within = prims.le(prims.abs(prims.sub(a, b)), prims.add(prims.mul(prims.abs(b), rtol), atol))
        result = prims.bitwise_or(equal, within)
        if equal_nan:
            both_nan = prims.bitwise_and(prims.ne(a, a), prims.ne(b, b))
            result = prims.bitwise_or(result, both_nan)
        return result

    return elementwise(close, input, other, promotion=Promotion.ALWAYS_BOOL)


@register("torch.nansum", "torch.Tensor.nansum")
def nansum(input: TensorProxy, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> TensorProxy:
    """torch.sum with NaNs counted as zero."""
    if dtypes.is_float(input.dtype):
        input = prims.where(prims.ne(input, input), 0.0, input)
    return sum_op(input, dim, keepdim, dtype=dtype)


@register("torch.nanmean", "torch.Tensor.nanmean")
def nanmean(
    input: TensorProxy, dim: Any = None, keepdim: bool = False, *, dtype: Any = None, out: Any = None
) -> TensorProxy:
    """The mean of the elements that are not NaN (NaN where all are)."""
    check_no_out("torch.nanmean", out)
    check(
        dtypes.is_float(input.dtype),
        lambda: f"torch.nanmean: expected a floating point input, got {input.dtype}{called_at()}",
        RuntimeError,
    )
    counted = sum_op(prims.eq(input, input), dim, keepdim)
    return elementwise(prims.div, nansum(input, dim, keepdim, dtype=dtype), counted)


@register("torch.frac", "torch.Tensor.frac")
def frac(input: TensorProxy, *, out: Any = None) -> TensorProxy:
    """input - trunc(input): the fractional part, with the input's sign."""
    check_no_out("torch.frac", out)
    return elementwise(lambda x: prims.sub(x, prims.trunc(x)), input)


def _float_test(test: Callable, integers: bool) -> Callable:
    """An elementwise test of float values; integers and bools are never inf or NaN (`integers`:
    the test's answer for them)."""
    return lambda x: test(x) if dtypes.is_float(x.dtype) else (prims.eq(x, x) if integers else prims.ne(x, x))


@register("torch.isinf", "torch.Tensor.isinf")
def isinf(input: TensorProxy) -> Any:
    test = _float_test(lambda x: prims.eq(prims.abs(x), math.inf), False)
    return elementwise(test, input, promotion=Promotion.ALWAYS_BOOL)


@register("torch.isfinite", "torch.Tensor.isfinite")
def isfinite(input: TensorProxy) -> Any:
    # NOTE: |x| < inf is False for inf and for NaN alike
    test = _float_test(lambda x: prims.lt(prims.abs(x), math.inf), True)
    return elementwise(test, input, promotion=Promotion.ALWAYS_BOOL)


@register("torch.isposinf", "torch.Tensor.isposinf")
def isposinf(input: TensorProxy) -> Any:
    return elementwise(_float_test(lambda x: prims.eq(x, math.inf), False), input, promotion=Promotion.ALWAYS_BOOL)


@register("torch.isneginf", "torch.Tensor.isneginf")
def isneginf(input: TensorProxy) -> Any:
    return elementwise(_float_test(lambda x: prims.eq(x, -math.inf), False), input, promotion=Promotion.ALWAYS_BOOL)


@register("torch.signbit", "torch.Tensor.signbit")
def signbit(input: TensorProxy, *, out: Any = None) -> TensorProxy:
    """Whether the sign bit is set: negative numbers and -0.0 (1 / -0.0 is -inf). A NaN's sign bit
    cannot be read without reinterpreting bits, which no prim does: NaN gives False."""
    check_no_out("torch.signbit", out)

    def negative(x: TensorProxy) -> TensorProxy:
        if x.dtype == torch.bool:
            return prims.ne(x, x)
        if not dtypes.is_float(x.dtype):
            return prims.lt(x, 0)
        return prims.bitwise_or(prims.lt(x, 0), prims.bitwise_and(prims.eq(x, 0), prims.lt(prims.div(1.0, x), 0)))

    return elementwise(negative, input, promotion=Promotion.ALWAYS_BOOL)


@register("torch.float_power", "torch.Tensor.float_power")
def float_power(input: Any, exponent: Any, *, out: Any = None) -> TensorProxy:
    """input ** exponent computed and returned in float64, whatever the operands' dtypes."""
    check_no_out("torch.float_power", out)
    check(
        isinstance(input, TensorProxy) or isinstance(exponent, TensorProxy),
        lambda: f"torch.float_power: expected a tensor operand, got {input!r} and {exponent!r}{called_at()}",
        TypeError,
    )

    def as_double(x: Any) -> Any:
        return to_dtype(x, torch.float64) if isinstance(x, TensorProxy) else float(x)

    return elementwise(prims.pow, as_double(input), as_double(exponent))


@register("torch.heaviside", "torch.Tensor.heaviside")
def heaviside(input: TensorProxy, values: TensorProxy, *, out: Any = None) -> TensorProxy:
    """The step function: 0 below zero, 1 above, `values` at zero (NaN gives 0, as eager's)."""
    check_no_out("torch.heaviside", out)
    check(
        isinstance(input, TensorProxy) and isinstance(values, TensorProxy) and input.dtype == values.dtype,
        lambda: f"torch.heaviside: expected two tensors of one dtype, got {input!r} and {values!r}{called_at()}",
        RuntimeError,
    )

    def step(x: TensorProxy, at_zero: TensorProxy) -> TensorProxy:
        return prims.where(prims.eq(x, 0), at_zero, to_dtype(prims.gt(x, 0), x.dtype))

    return elementwise(step, input, values)


def _nan_ignoring(name: str, keeps_input: Callable) -> Callable:
    """fmax / fmin: `input` where `keeps_input(input, other)` or `other` is NaN, else `other`, so a
    NaN loses to a number and two NaNs give NaN. A where, as eager's gradient: a tie goes to input."""

    def pick(a: Any, b: Any) -> Any:
        keep = keeps_input(a, b)
        if dtypes.is_float(a.dtype):
            keep = prims.bitwise_or(keep, prims.ne(b, b))
        return prims.where(keep, a, b)

    def op(input: TensorProxy, other: TensorProxy, *, out: Any = None) -> TensorProxy:
        check_no_out(f"torch.{name}", out)
        check(
            isinstance(input, TensorProxy) and isinstance(other, TensorProxy),
            lambda: f"torch.{name}: expected two tensors, got {input!r} and {other!r}{called_at()}",
            TypeError,
        )
        return elementwise(pick, input, other)

    op.__name__ = name
    op.__doc__ = f"torch.{name}: the elementwise {name[1:]}imum, NaN only where both operands are NaN."
    return op


fmax = register("torch.fmax", "torch.Tensor.fmax")(_nan_ignoring("fmax", prims.ge))
fmin = register("torch.fmin", "torch.Tensor.fmin")(_nan_ignoring("fmin", prims.le))


@register("torch.sinc", "torch.special.sinc", "torch.Tensor.sinc")
def sinc(input: TensorProxy, *, out: Any = None) -> TensorProxy:
    """sin(pi x) / (pi x), 1 at 0 (with a zero gradient there, as eager)."""
    check_no_out("torch.sinc", out)

    def body(x: TensorProxy) -> TensorProxy:
        zero = prims.eq(x, 0)
        scaled = prims.mul(prims.where(zero, 1.0, x), math.pi)
        return prims.where(zero, 1.0, prims.div(prims.sin(scaled), scaled))

    return elementwise(body, input, promotion=Promotion.INT_TO_FLOAT)
