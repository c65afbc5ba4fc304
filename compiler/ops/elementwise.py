"""Elementwise torch ops: unary math, arithmetic, comparisons, logic, where/clamp/lerp, casts.

Each op broadcasts and promotes through `operands.elementwise`, which computes bf16/f16 in
float32 and rounds once at the end, as torch does.
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
from compiler.ops.operands import (
    Promotion,
    broadcast_shapes,
    broadcast_to,
    check_no_out,
    elementwise,
    is_number,
    on_one_device,
    result_dtypes,
    to_dtype,
)
from compiler.ops.registry import register

# ---------------------------------------------------------------------------------------------
# Unary


def _unary(
    name: str, prim_fn: Callable, promotion: Promotion, *, methods: bool = True, aliases: tuple[str, ...] = ()
) -> None:
    names = [f"torch.{name}"] + ([f"torch.Tensor.{name}"] if methods else []) + list(aliases)

    @register(*names)
    def op(input: TensorProxy, *, out: Any = None) -> Any:
        check_no_out(f"torch.{name}", out)
        return elementwise(prim_fn, input, promotion=promotion)

    op.__name__ = name


# Other spellings torch has for these ops (the in-place forms are in inplace.py).
_ALIASES = {
    "exp2": ("torch.special.exp2",),
    "log1p": ("torch.special.log1p",),
    "asinh": ("torch.arcsinh", "torch.Tensor.arcsinh"),
    "acosh": ("torch.arccosh", "torch.Tensor.arccosh"),
    "atanh": ("torch.arctanh", "torch.Tensor.arctanh"),
    "erf": ("torch.special.erf",),
    "erfc": ("torch.special.erfc",),
}
for _name in (
    "exp", "exp2", "log", "log1p", "log2", "log10", "sqrt", "rsqrt", "sin", "cos", "tan", "sinh", "cosh", "tanh",
    "asinh", "acosh", "atanh", "erf", "erfc", "reciprocal",
):  # fmt: skip
    _unary(_name, getattr(prims, _name), Promotion.INT_TO_FLOAT, aliases=_ALIASES.get(_name, ()))
_unary("sign", prims.sign, Promotion.DEFAULT, aliases=("torch.sgn", "torch.Tensor.sgn"))  # sgn of real tensors
_unary("square", lambda x: prims.mul(x, x), Promotion.BOOL_TO_LONG)


def _rounding(name: str) -> None:
    prim_fn = getattr(prims, name)

    @register(f"torch.{name}", f"torch.Tensor.{name}")
    def op(input: TensorProxy, *, out: Any = None) -> Any:
        check_no_out(f"torch.{name}", out)
        if not dtypes.is_float(input.dtype):
            return fresh_copy(input)
        return elementwise(prim_fn, input)


for _name in ("floor", "ceil", "trunc"):
    _rounding(_name)


@register("torch.positive", "torch.Tensor.positive", "torch.Tensor.__pos__")
def positive(input: TensorProxy) -> TensorProxy:
    check(input.dtype != torch.bool, lambda: f"The `+` operator, on a bool tensor is not supported.{called_at()}")
    return input


@register("torch.neg", "torch.Tensor.neg", "torch.Tensor.__neg__", "torch.negative")
def neg(input: TensorProxy, *, out: Any = None) -> Any:
    check_no_out("torch.neg", out)
    check(
        input.dtype != torch.bool,
        lambda: f"torch.neg is not defined for bool tensors{called_at()}",
        TypeError,
    )
    return elementwise(prims.neg, input)


@register("torch.abs", "torch.Tensor.abs", "torch.Tensor.__abs__", "torch.absolute")
def abs(input: TensorProxy, *, out: Any = None) -> Any:
    check_no_out("torch.abs", out)
    if input.dtype == torch.bool:
        return fresh_copy(input)
    return elementwise(prims.abs, input)


@register("torch.isnan", "torch.Tensor.isnan")
def isnan(input: TensorProxy) -> Any:
    return elementwise(lambda x: prims.ne(x, x), input, promotion=Promotion.ALWAYS_BOOL)


@register("torch.logical_not", "torch.Tensor.logical_not")
def logical_not(input: TensorProxy, *, out: Any = None) -> Any:
    check_no_out("torch.logical_not", out)
    return elementwise(lambda x: prims.eq(x, 0), input, promotion=Promotion.ALWAYS_BOOL)


# ---------------------------------------------------------------------------------------------
# Binary arithmetic


def _integral(x: Any) -> bool:
    return (isinstance(x, TensorProxy) and not dtypes.is_float(x.dtype)) or isinstance(x, int)


@register("torch.add", "torch.Tensor.add", "torch.Tensor.__add__", "torch.Tensor.__radd__")
def add(input: Any, other: Any, *, alpha: Any = None, out: Any = None) -> Any:
    check_no_out("torch.add", out)
    if alpha is None or (isinstance(alpha, (int, float)) and alpha == 1):
        return elementwise(prims.add, input, other)
    return elementwise(lambda a, b: prims.add(a, prims.mul(b, alpha)), input, other)


@register("torch.sub", "torch.Tensor.sub", "torch.Tensor.__sub__", "torch.subtract")
def sub(input: Any, other: Any, *, alpha: Any = None, out: Any = None) -> Any:
    check_no_out("torch.sub", out)
    for x in (input, other):
        check(
            not (isinstance(x, TensorProxy) and x.dtype == torch.bool),
            lambda: f"subtracting bool tensors is not supported by torch; use logical_xor{called_at()}",
            TypeError,
        )
    if alpha is None or (isinstance(alpha, (int, float)) and alpha == 1):
        return elementwise(prims.sub, input, other)
    return elementwise(lambda a, b: prims.sub(a, prims.mul(b, alpha)), input, other)


@register("torch.Tensor.__rsub__", "torch.rsub")
def rsub(input: Any, other: Any, *, alpha: Any = None) -> Any:
    return sub(other, input, alpha=alpha)


@register("torch.mul", "torch.Tensor.mul", "torch.Tensor.__mul__", "torch.Tensor.__rmul__", "torch.multiply")
def mul(input: Any, other: Any, *, out: Any = None) -> Any:
    check_no_out("torch.mul", out)
    return elementwise(prims.mul, input, other)


def _floor_divide(a: Any, b: Any) -> Any:
    return prims.floor_divide(a, b)


def _trunc_divide(a: Any, b: Any) -> Any:
    # NOTE: a - fmod(a, b) is an exact multiple of b, so the floor division below is exact.
    if isinstance(a, TensorProxy) or isinstance(b, TensorProxy):
        if not isinstance(a, TensorProxy):
            a = prims.full(b.shape, a, b.dtype, b.device)
        return prims.floor_divide(prims.sub(a, prims.fmod(a, b)), b)
    return prims.trunc(prims.div(a, b)) if isinstance(a, float) else int(a / b)


@register("torch.div", "torch.Tensor.div", "torch.divide", "torch.true_divide", "torch.Tensor.true_divide")
def div(input: Any, other: Any, *, rounding_mode: str | None = None, out: Any = None) -> Any:
    check_no_out("torch.div", out)
    check(
        rounding_mode in (None, "trunc", "floor"),
        lambda: f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}{called_at()}",
        ValueError,
    )
    if rounding_mode is None:
        return elementwise(prims.div, input, other, promotion=Promotion.INT_TO_FLOAT)
    compute, result = result_dtypes([input, other], Promotion.DEFAULT)
    if not dtypes.is_float(compute):
        return elementwise(_trunc_divide if rounding_mode == "trunc" else _floor_divide, input, other)
    # NOTE: torch floor-divides bf16/f16 in that dtype, and rounds a bf16/f16 quotient to its
    # dtype before truncating it; matching eager bit for bit means doing the same.
    if rounding_mode == "floor":
        return elementwise(_floor_divide, input, other, compute=result)
    return elementwise(lambda a, b: prims.trunc(to_dtype(to_dtype(prims.div(a, b), result), compute)), input, other)


@register("torch.Tensor.__truediv__")
def truediv(input: Any, other: Any) -> Any:
    return div(input, other)


@register("torch.Tensor.__rtruediv__")
def rtruediv(input: Any, other: Any) -> Any:
    return div(other, input)


@register("torch.floor_divide", "torch.Tensor.floor_divide", "torch.Tensor.__floordiv__")
def floor_divide(input: Any, other: Any, *, out: Any = None) -> Any:
    check_no_out("torch.floor_divide", out)
    return div(input, other, rounding_mode="floor")


@register("torch.Tensor.__rfloordiv__")
def rfloordiv(input: Any, other: Any) -> Any:
    return div(other, input, rounding_mode="floor")


@register("torch.remainder", "torch.Tensor.remainder", "torch.Tensor.__mod__")
def remainder(input: Any, other: Any, *, out: Any = None) -> Any:
    check_no_out("torch.remainder", out)
    return elementwise(prims.remainder, input, other)


@register("torch.Tensor.__rmod__")
def rmod(input: Any, other: Any) -> Any:
    return remainder(other, input)


@register("torch.fmod", "torch.Tensor.fmod")
def fmod(input: Any, other: Any, *, out: Any = None) -> Any:
    check_no_out("torch.fmod", out)
    return elementwise(prims.fmod, input, other)


@register("torch.pow", "torch.Tensor.pow", "torch.Tensor.__pow__")
def pow(input: Any, exponent: Any, *, out: Any = None) -> Any:
    check_no_out("torch.pow", out)
    if isinstance(exponent, (int, float)) and not isinstance(exponent, bool) and isinstance(input, TensorProxy):
        if exponent == 1:
            return elementwise(lambda x: prims.mul(x, 1), input)
        if exponent == 2:
            return elementwise(lambda x: prims.mul(x, x), input)
    return elementwise(prims.pow, input, exponent)


@register("torch.Tensor.__rpow__")
def rpow(input: Any, other: Any) -> Any:
    return pow(other, input)


@register("torch.maximum", "torch.Tensor.maximum")
def maximum(input: TensorProxy, other: TensorProxy, *, out: Any = None) -> Any:
    check_no_out("torch.maximum", out)
    return elementwise(prims.maximum, input, other)


@register("torch.minimum", "torch.Tensor.minimum")
def minimum(input: TensorProxy, other: TensorProxy, *, out: Any = None) -> Any:
    check_no_out("torch.minimum", out)
    return elementwise(prims.minimum, input, other)


# ---------------------------------------------------------------------------------------------
# Comparisons and logic


def _comparison(name: str, prim_fn: Callable, dunder: str, alias: str | None = None) -> None:
    """`torch.<name>`, its method and dunder, and torch's long alias (`torch.greater` for `gt`)."""
    aliases = (f"torch.{alias}", f"torch.Tensor.{alias}") if alias else ()

    @register(f"torch.{name}", f"torch.Tensor.{name}", f"torch.Tensor.{dunder}", *aliases)
    def op(input: Any, other: Any, *, out: Any = None) -> Any:
        check_no_out(f"torch.{name}", out)
        return elementwise(prim_fn, input, other, promotion=Promotion.ALWAYS_BOOL)


_comparison("eq", prims.eq, "__eq__")
_comparison("ne", prims.ne, "__ne__", "not_equal")
_comparison("lt", prims.lt, "__lt__", "less")
_comparison("le", prims.le, "__le__", "less_equal")
_comparison("gt", prims.gt, "__gt__", "greater")
_comparison("ge", prims.ge, "__ge__", "greater_equal")


def _as_bool(x: Any) -> Any:
    if isinstance(x, TensorProxy):
        return x if x.dtype == torch.bool else elementwise(lambda v: prims.ne(v, 0), x, promotion=Promotion.ALWAYS_BOOL)
    return bool(x) if not is_number(x) or isinstance(x, (int, float)) else x


def _logical(name: str, prim_fn: Callable) -> None:
    @register(f"torch.{name}", f"torch.Tensor.{name}")
    def op(input: Any, other: Any, *, out: Any = None) -> Any:
        check_no_out(f"torch.{name}", out)
        return elementwise(prim_fn, _as_bool(input), _as_bool(other))


_logical("logical_and", prims.bitwise_and)
_logical("logical_or", prims.bitwise_or)
_logical("logical_xor", prims.bitwise_xor)


def _bitwise(name: str, prim_fn: Callable, *dunders: str) -> None:
    @register(f"torch.{name}", f"torch.Tensor.{name}", *(f"torch.Tensor.{d}" for d in dunders))
    def op(input: Any, other: Any, *, out: Any = None) -> Any:
        check_no_out(f"torch.{name}", out)
        for x in (input, other):
            check(
                not isinstance(x, float) and not (isinstance(x, TensorProxy) and dtypes.is_float(x.dtype)),
                lambda: f"torch.{name} needs integer or bool operands{called_at()}",
                TypeError,
            )
        return elementwise(prim_fn, input, other)


_bitwise("bitwise_and", prims.bitwise_and, "__and__", "__rand__")
_bitwise("bitwise_or", prims.bitwise_or, "__or__", "__ror__")
_bitwise("bitwise_xor", prims.bitwise_xor, "__xor__", "__rxor__")


@register("torch.bitwise_not", "torch.Tensor.bitwise_not", "torch.Tensor.__invert__")
def bitwise_not(input: TensorProxy, *, out: Any = None) -> Any:
    check_no_out("torch.bitwise_not", out)
    check(
        not dtypes.is_float(input.dtype),
        lambda: f"bitwise_not needs an integer or bool tensor{called_at()}",
        TypeError,
    )
    return elementwise(prims.bitwise_not, input)


# ---------------------------------------------------------------------------------------------
# where, clamp, lerp, addcmul, addcdiv, masked_fill


@register("torch.where")
def where(condition: TensorProxy, input: Any = None, other: Any = None, *, out: Any = None) -> Any:
    check_no_out("torch.where", out)
    check(
        input is not None and other is not None,
        lambda: (
            f"torch.where(condition) with one argument returns data-dependent shapes and is not supported{called_at()}"
        ),
        NotImplementedError,
    )
    if isinstance(condition, TensorProxy) and condition.dtype != torch.bool:
        condition = _as_bool(condition)
    condition, input, other = on_one_device([condition, input, other])
    tensors = [x for x in (condition, input, other) if isinstance(x, TensorProxy)]
    shape = broadcast_shapes(*(t.shape for t in tensors))
    _, result = result_dtypes([input, other], Promotion.DEFAULT)
    device = tensors[0].device
    branches = []
    for x in (input, other):
        x = broadcast_to(x, shape) if isinstance(x, TensorProxy) else x
        branches.append(to_dtype(x, result))
    if not any(isinstance(b, TensorProxy) for b in branches):
        branches[0] = prims.full(list(shape), branches[0], result, device)
    return prims.where(broadcast_to(condition, shape), *branches)


@register("torch.Tensor.where")
def where_method(input: TensorProxy, condition: TensorProxy, other: Any) -> Any:
    # NOTE: the method's receiver is the value taken where the condition holds: x.where(c, y).
    return where(condition, input, other)


@register("torch.clamp", "torch.Tensor.clamp", "torch.clip", "torch.Tensor.clip")
def clamp(input: TensorProxy, min: Any = None, max: Any = None, *, out: Any = None) -> Any:
    check_no_out("torch.clamp", out)
    check(
        min is not None or max is not None,
        lambda: f"torch.clamp needs at least one of min and max{called_at()}",
        ValueError,
    )
    args = [input] + [b for b in (min, max) if b is not None]

    def body(x: Any, *bounds: Any) -> Any:
        bounds_iter = iter(bounds)
        if min is not None:
            x = _bounded(x, next(bounds_iter), prims.ge)
        if max is not None:
            x = _bounded(x, next(bounds_iter), prims.le)
        return x

    return elementwise(body, *args)


def _bounded(x: Any, bound: Any, within: Callable[[Any, Any], Any]) -> Any:
    # NOTE: selects, not maximum/minimum: where x equals its bound the gradient goes to x whole (as
    # eager's clamp backward), where maximum's splits ties in halves; a NaN x stays NaN and, as in
    # eager, gets no gradient; a NaN bound gives NaN.
    beyond = prims.where(prims.ne(x, x), prims.mul(x, 0.0), bound) if dtypes.is_float(x.dtype) else bound
    return prims.where(within(x, bound), x, beyond)


@register("torch.clamp_min", "torch.Tensor.clamp_min")
def clamp_min(input: TensorProxy, min: Any) -> Any:
    return clamp(input, min=min)


@register("torch.clamp_max", "torch.Tensor.clamp_max")
def clamp_max(input: TensorProxy, max: Any) -> Any:
    return clamp(input, max=max)


@register("torch.lerp", "torch.Tensor.lerp")
def lerp(input: TensorProxy, end: TensorProxy, weight: Any, *, out: Any = None) -> Any:
    check_no_out("torch.lerp", out)

    # NOTE: torch switches formula at |weight| = 0.5 to stay exact at both ends; so do we.
    def body(start: Any, stop: Any, w: Any) -> Any:
        diff = prims.sub(stop, start)
        low = prims.add(start, prims.mul(w, diff))
        high = prims.sub(stop, prims.mul(diff, prims.sub(1.0, w)))
        if isinstance(w, TensorProxy):
            return prims.where(prims.lt(prims.abs(w), 0.5), low, high)
        return low if -0.5 < w < 0.5 else high

    return elementwise(body, input, end, weight)


@register("torch.addcmul", "torch.Tensor.addcmul")
def addcmul(input: TensorProxy, tensor1: Any, tensor2: Any, *, value: Any = 1, out: Any = None) -> Any:
    check_no_out("torch.addcmul", out)
    return _with_value(lambda a, b, c, v: prims.add(a, prims.mul(prims.mul(b, v), c)), input, tensor1, tensor2, value)


@register("torch.addcdiv", "torch.Tensor.addcdiv")
def addcdiv(input: TensorProxy, tensor1: Any, tensor2: Any, *, value: Any = 1, out: Any = None) -> Any:
    check_no_out("torch.addcdiv", out)
    check(
        not all(_integral(t) for t in (tensor1, tensor2)),
        lambda: f"addcdiv with two integer tensors is not supported by torch{called_at()}",
        TypeError,
    )
    return _with_value(lambda a, b, c, v: prims.add(a, prims.mul(prims.div(b, c), v)), input, tensor1, tensor2, value)


def _with_value(body: Callable, input: Any, tensor1: Any, tensor2: Any, value: Any) -> Any:
    """addcmul/addcdiv: a 0-d tensor `value` (torch.optim passes one) is a Scalar: not promoted."""
    if not isinstance(value, TensorProxy):
        return elementwise(body, input, tensor1, tensor2, value)
    compute, result = result_dtypes((input, tensor1, tensor2), Promotion.DEFAULT)
    return to_dtype(elementwise(body, input, tensor1, tensor2, value, compute=compute), result)


@register("torch.masked_fill", "torch.Tensor.masked_fill")
def masked_fill(input: TensorProxy, mask: TensorProxy, value: Any) -> Any:
    check(
        isinstance(mask, TensorProxy) and mask.dtype == torch.bool,
        lambda: f"masked_fill: mask must be a bool tensor, got {mask!r}{called_at()}",
        TypeError,
    )
    if isinstance(value, TensorProxy):
        check(
            value.ndim == 0,
            lambda: f"masked_fill: value must be a 0-d tensor or a number{called_at()}",
            ValueError,
        )
    # NOTE: the out-of-place op broadcasts the input with the mask (torch expands, then fills).
    shape = broadcast_shapes(input.shape, mask.shape)
    if isinstance(value, TensorProxy):
        fill = broadcast_to(to_dtype(value, input.dtype), shape)
    elif isinstance(value, (int, float, bool)):
        fill = dtypes.python_type(input.dtype)(value)
    else:
        fill = to_dtype(value, input.dtype)
    return prims.where(broadcast_to(mask, shape), fill, broadcast_to(input, shape))


# ---------------------------------------------------------------------------------------------
# logaddexp, nan_to_num


@register("torch.nan_to_num", "torch.Tensor.nan_to_num")
def nan_to_num(
    input: TensorProxy,
    nan: float | None = 0.0,
    posinf: float | None = None,
    neginf: float | None = None,
    *,
    out: Any = None,
) -> Any:
    """NaN, inf and -inf replaced (by default with 0 and the dtype's largest and lowest finite values)."""
    check_no_out("torch.nan_to_num", out)
    if not dtypes.is_float(input.dtype):
        return fresh_copy(input)
    info = torch.finfo(input.dtype)
    nan = 0.0 if nan is None else nan
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf

    def body(x: Any) -> Any:
        x = prims.where(prims.eq(x, math.inf), posinf, x)
        x = prims.where(prims.eq(x, -math.inf), neginf, x)
        return prims.where(prims.ne(x, x), nan, x)

    return elementwise(body, input)
