"""Special elementwise functions: atan2, erfinv, hypot, logit, xlogy, logaddexp, logaddexp2 and expm1.

atan2 and erfinv are prims (nvFuser has both ops); hypot, logit, xlogy, logaddexp, logaddexp2 and expm1 are
written with prims so that their values at the special points (0, +-inf, NaN) and their gradients are
eager's. Integer and bool inputs give the default float dtype as in eager; each computes in its float
compute dtype (bf16/f16 in float32) and rounds once. The in-place forms (`atan2_`, `logit_`, ...) are
in inplace.py.
"""

from __future__ import annotations

import math
import struct
from typing import Any

import torch

from compiler import prims
from compiler.core import dtypes
from compiler.core.errors import called_at, check
from compiler.core.ir import NumberProxy, TensorProxy
from compiler.ops.operands import Promotion, check_no_out, elementwise, result_dtypes
from compiler.ops.registry import register


def tensors_only(name: str, *args: Any) -> None:
    """Eager's check for ops whose every operand must be a tensor (a Python number is a TypeError)."""
    for a in args:
        check(
            isinstance(a, TensorProxy),
            lambda a=a: f"{name}: expected tensors, got {type(a).__name__} {a!r}{called_at()}",
            TypeError,
        )


@register("torch.atan2", "torch.arctan2", "torch.Tensor.atan2", "torch.Tensor.arctan2")
def atan2(input: TensorProxy, other: TensorProxy, *, out: Any = None) -> Any:
    """The angle in radians, in [-pi, pi], of the point (other, input): atan(input / other) in its quadrant."""
    check_no_out("torch.atan2", out)
    tensors_only("torch.atan2", input, other)
    return elementwise(prims.atan2, input, other, promotion=Promotion.INT_TO_FLOAT)


@register("torch.erfinv", "torch.special.erfinv", "torch.Tensor.erfinv")
def erfinv(input: TensorProxy, *, out: Any = None) -> Any:
    """The inverse of erf on [-1, 1] (+-inf at +-1, NaN outside)."""
    check_no_out("torch.erfinv", out)
    tensors_only("torch.erfinv", input)
    return elementwise(prims.erfinv, input, promotion=Promotion.INT_TO_FLOAT)


def _hypot(a: Any, b: Any) -> Any:
    # NOTE: m * sqrt(1 + (n / m)^2), m the larger magnitude, never overflows or underflows where
    # a^2 + b^2 would (as std::hypot). Where m is 0 both are 0 and the quotient is NaN, which the
    # where drops but the gradient keeps: eager's a / hypot is NaN there too. An infinite operand
    # gives inf even beside a NaN, as std::hypot.
    abs_a, abs_b = prims.abs(a), prims.abs(b)
    a_larger = prims.ge(abs_a, abs_b)
    m = prims.where(a_larger, abs_a, abs_b)
    n = prims.where(a_larger, abs_b, abs_a)
    ratio = prims.div(n, m)
    scaled = prims.mul(m, prims.sqrt(prims.add(prims.mul(ratio, ratio), 1.0)))
    finite = prims.where(prims.eq(m, 0.0), m, scaled)
    infinite = prims.bitwise_or(prims.eq(abs_a, math.inf), prims.eq(abs_b, math.inf))
    return prims.where(infinite, math.inf, finite)


@register("torch.hypot", "torch.Tensor.hypot")
def hypot(input: TensorProxy, other: TensorProxy, *, out: Any = None) -> Any:
    """sqrt(input^2 + other^2), without overflow in between; floating tensors only, as eager."""
    check_no_out("torch.hypot", out)
    tensors_only("torch.hypot", input, other)
    _, result = result_dtypes([input, other], Promotion.DEFAULT)
    check(
        result.is_floating_point,
        lambda: f"torch.hypot needs floating tensors (eager has no {result} kernel){called_at()}",
        TypeError,
    )
    return elementwise(_hypot, input, other)


def _in_dtype(value: float, dtype: torch.dtype) -> float:
    """`value` rounded to `dtype` (to nearest, ties to even), as eager's kernels hold a scalar argument."""
    if dtype == torch.float64:
        return float(value)
    if dtype == torch.float16:
        return struct.unpack("e", struct.pack("e", value))[0]
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    if dtype == torch.bfloat16 and value == value:
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", bits))[0]


@register("torch.logit", "torch.special.logit", "torch.Tensor.logit")
def logit(input: TensorProxy, eps: float | None = None, *, out: Any = None) -> Any:
    """log(x / (1 - x)); with `eps` >= 0, x is first clamped to [eps, 1 - eps] (NaN stays NaN)."""
    check_no_out("torch.logit", out)
    tensors_only("torch.logit", input)
    check(
        eps is None or isinstance(eps, (int, float, NumberProxy)),
        lambda: f"torch.logit: eps must be a number or None, got {type(eps).__name__}{called_at()}",
        TypeError,
    )
    _, result = result_dtypes([input], Promotion.INT_TO_FLOAT)
    clamp = eps is not None and eps >= 0
    if clamp and not isinstance(eps, NumberProxy):
        lo = _in_dtype(eps, result)
        hi = _in_dtype(1.0 - lo, result)
    elif clamp:
        lo, hi = eps, prims.sub(1.0, eps)

    def body(x: Any) -> Any:
        if clamp:
            # NOTE: wheres, not clamp's min/max: below eps or above 1 - eps the gradient is 0, at
            # them it is not (eager's logit_backward); NaN falls through.
            x = prims.where(prims.lt(x, lo), lo, prims.where(prims.gt(x, hi), hi, x))
        else:
            # NOTE: x * 1 in [0, 1] and x * NaN elsewhere: the value is NaN there anyway, and so becomes
            # the gradient, as eager's logit_backward gives there (1/x + 1/(1 - x) is finite).
            ones = prims.full(list(x.shape), 1.0, x.dtype, x.device)
            x = prims.mul(x, prims.where(prims.bitwise_and(prims.ge(x, 0.0), prims.le(x, 1.0)), ones, math.nan))
        # NOTE: log(x) - log1p(-x), not log(x / (1 - x)): the same value (within rounding), and its
        # gradient 1/x + 1/(1 - x) is eager's 1 / (x (1 - x)) at 0 and 1 too (inf, not NaN).
        return prims.sub(prims.log(x), prims.log1p(prims.neg(x)))

    return elementwise(body, input, promotion=Promotion.INT_TO_FLOAT)


def _xlogy(x: Any, y: Any) -> Any:
    like = x if isinstance(x, TensorProxy) else y
    x, y = (
        t if isinstance(t, TensorProxy) else prims.full(list(like.shape), t, like.dtype, like.device) for t in (x, y)
    )
    # NOTE: the log reads 1 where x is 0 and y <= 0, so the value there is 0 (eager's) and so is x's
    # gradient (eager's xlogy(g, y) masked where x == 0 and y <= 0); elsewhere x's gradient is
    # g * log(y) and y's g * x / y, as eager's. A NaN y gives NaN. 0 * log(inf) is NaN, hence the
    # last where: its value there is eager's 0 (x's gradient there: NaN, eager's inf).
    log = prims.log(prims.where(prims.bitwise_and(prims.eq(x, 0.0), prims.le(y, 0.0)), 1.0, y))
    return prims.where(prims.bitwise_and(prims.eq(x, 0.0), prims.eq(y, math.inf)), 0.0, prims.mul(x, log))


@register("torch.xlogy", "torch.special.xlogy", "torch.Tensor.xlogy")
def xlogy(input: Any, other: Any, *, out: Any = None) -> Any:
    """input * log(other), 0 where input is 0 (unless other is NaN); either operand may be a number."""
    check_no_out("torch.xlogy", out)
    check(
        isinstance(input, TensorProxy) or isinstance(other, TensorProxy),
        lambda: f"torch.xlogy: one of input and other must be a tensor{called_at()}",
        TypeError,
    )
    return elementwise(_xlogy, input, other, promotion=Promotion.INT_TO_FLOAT)


def _logaddexp(a: Any, b: Any) -> Any:
    # NOTE: as eager, equal infinities give themselves (inf - inf would make the formula NaN).
    both_inf = prims.bitwise_and(prims.eq(a, b), prims.eq(prims.abs(a), math.inf))
    stable = prims.add(prims.maximum(a, b), prims.log1p(prims.exp(prims.neg(prims.abs(prims.sub(a, b))))))
    return prims.where(both_inf, a, stable)


@register("torch.logaddexp", "torch.Tensor.logaddexp")
def logaddexp(input: TensorProxy, other: TensorProxy, *, out: Any = None) -> Any:
    """log(exp(input) + exp(other)), computed without overflow."""
    check_no_out("torch.logaddexp", out)
    check(
        dtypes.is_float(result_dtypes([input, other], Promotion.DEFAULT)[1]),
        lambda: f"torch.logaddexp needs a floating operand{called_at()}",
        TypeError,
    )
    return elementwise(_logaddexp, input, other)


def _logaddexp2(a: Any, b: Any) -> Any:
    # NOTE: eager's formula, max + log1p(exp2(-|a - b|)) / ln 2 (log1p keeps the digits of a small
    # exp2 that log2(1 + ...) would round away), and equal infinities give themselves as in logaddexp.
    both_inf = prims.bitwise_and(prims.eq(a, b), prims.eq(prims.abs(a), math.inf))
    tail = prims.log1p(prims.exp2(prims.neg(prims.abs(prims.sub(a, b)))))
    stable = prims.add(prims.maximum(a, b), prims.mul(tail, 1.0 / math.log(2.0)))
    return prims.where(both_inf, a, stable)


@register("torch.logaddexp2", "torch.Tensor.logaddexp2")
def logaddexp2(input: TensorProxy, other: TensorProxy, *, out: Any = None) -> Any:
    """log2(2**input + 2**other), computed without overflow."""
    check_no_out("torch.logaddexp2", out)
    tensors_only("torch.logaddexp2", input, other)
    check(
        dtypes.is_float(result_dtypes([input, other], Promotion.DEFAULT)[1]),
        lambda: f"torch.logaddexp2 needs a floating operand{called_at()}",
        TypeError,
    )
    return elementwise(_logaddexp2, input, other)


def _expm1(x: Any) -> Any:
    # NOTE: exp(x) - 1 loses the digits of small x; tanh(x / 2) * (exp(x) + 1) is the same value with
    # tanh's relative accuracy near 0. Farther out exp(x) - 1 is as accurate, and its gradient stays
    # exp(x) where exp overflows (the product's would be 0 * inf); the product reads x only near 0,
    # so its gradient is finite where the where drops it.
    small = prims.lt(prims.abs(x), 0.5)
    near_zero = prims.where(small, x, 0.0)
    product = prims.mul(prims.tanh(prims.mul(near_zero, 0.5)), prims.add(prims.exp(near_zero), 1.0))
    return prims.where(small, product, prims.sub(prims.exp(x), 1.0))


@register("torch.expm1", "torch.special.expm1", "torch.Tensor.expm1")
def expm1(input: TensorProxy, *, out: Any = None) -> Any:
    """exp(input) - 1, accurate for small inputs (XIELU's activation)."""
    check_no_out("torch.expm1", out)
    tensors_only("torch.expm1", input)
    return elementwise(_expm1, input, promotion=Promotion.INT_TO_FLOAT)
