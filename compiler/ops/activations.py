"""Activation functions (sigmoid, SiLU, GELU, ReLU, PReLU, softplus, ELU family, GLU, ...) written with prims.

Each computes in its float compute dtype (bf16/f16 in float32) and rounds once at the end.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from compiler import prims
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy
from compiler.ops.inplace import apply_in_place
from compiler.ops.operands import Promotion, canonical_dim, check_no_out, elementwise, result_dtypes, to_dtype
from compiler.ops.registry import register, torch_name
from compiler.ops.shape import narrow


def _float_unary(x: TensorProxy, body: Callable[[Any], Any]) -> Any:
    """Applies `body` (written with prims) to `x` in its compute dtype and rounds once."""
    compute, result = result_dtypes([x], Promotion.INT_TO_FLOAT)
    y = body(to_dtype(x, compute))
    return to_dtype(y, result)


def _in_place(fn: Callable, input: TensorProxy, *args: Any) -> TensorProxy:
    """An activation's `inplace=True`, as eager: `input` (and every view of it) overwritten with
    `fn(input, *args)`; returns `input` itself."""
    return apply_in_place(fn, input, args, {}, f"{torch_name(fn)}(inplace=True)")


def _sigmoid(x: Any) -> Any:
    return prims.reciprocal(prims.add(prims.exp(prims.neg(x)), 1.0))


# NOTE: torch.nn.functional.sigmoid is not registered: it calls input.sigmoid(), which is.
@register("torch.sigmoid", "torch.Tensor.sigmoid", "torch.special.expit")
def sigmoid(input: TensorProxy, *, out: Any = None) -> Any:
    check_no_out("torch.sigmoid", out)
    return _float_unary(input, _sigmoid)


@register("torch.nn.functional.silu")
def silu(input: TensorProxy, inplace: bool = False) -> Any:
    if inplace:
        return _in_place(F.silu, input)
    return _float_unary(input, lambda x: prims.mul(x, _sigmoid(x)))


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _gelu_tanh(x: Any) -> Any:
    inner = prims.mul(prims.add(x, prims.mul(prims.mul(prims.mul(x, x), x), 0.044715)), _SQRT_2_OVER_PI)
    return prims.mul(prims.mul(x, 0.5), prims.add(prims.tanh(inner), 1.0))


def _gelu_erf(x: Any) -> Any:
    return prims.mul(prims.mul(x, 0.5), prims.add(prims.erf(prims.mul(x, math.sqrt(0.5))), 1.0))


@register("torch.nn.functional.gelu")
def gelu(input: TensorProxy, approximate: str = "none") -> Any:
    check(
        approximate in ("none", "tanh"),
        lambda: f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}{called_at()}",
        ValueError,
    )
    return _float_unary(input, _gelu_tanh if approximate == "tanh" else _gelu_erf)


@register("torch.relu", "torch.Tensor.relu", "torch.nn.functional.relu")
def relu(input: TensorProxy, inplace: bool = False) -> Any:
    if inplace:
        return _in_place(F.relu, input)
    check(input.dtype != torch.bool, lambda: f"relu is not defined for bool tensors{called_at()}", TypeError)
    # NOTE: a where, not maximum(x, 0), so the gradient at exactly 0 is 0 as eager's threshold_backward
    # gives (maximum's rule splits a tie in halves); NaN stays NaN.
    return elementwise(lambda x: prims.where(prims.le(x, 0), 0, x), input)


# NOTE: leaky_relu, hardtanh, relu6 and threshold pick their pieces with where, not minimum/maximum
# (whose gradient halves at a tie): at a boundary the gradient is eager's. NaN fails every
# comparison, so it falls through to x and stays NaN (its gradient is x's, as in eager).


def _scalar_for(name: str, input: TensorProxy, value: Any) -> Any:
    """A scalar argument of `name` as eager applies it to `input`: integer tensors take a float
    truncated toward zero (Scalar.to<int64_t>(): hardtanh(x, -1.5, 2.5) of int64 clamps to [-1, 2])."""
    check(input.dtype != torch.bool, lambda: f"{name} is not defined for bool tensors{called_at()}", TypeError)
    if input.dtype.is_floating_point or not isinstance(value, float):
        return value
    check(
        math.isfinite(value) and -(2**63) <= value < 2**63,
        lambda: f"{name}: {value} cannot be converted to {input.dtype} without overflow{called_at()}",
        RuntimeError,
    )
    return int(value)


@register("torch.nn.functional.leaky_relu")
def leaky_relu(input: TensorProxy, negative_slope: float = 0.01, inplace: bool = False) -> Any:
    """x where x > 0, else x * negative_slope (0 itself takes the slope's gradient, as eager)."""
    if inplace:
        return _in_place(F.leaky_relu, input, negative_slope)
    return _float_unary(
        _float_input("leaky_relu", input),
        lambda x: prims.where(prims.gt(x, 0.0), x, prims.mul(x, negative_slope)),
    )


@register("torch.prelu", "torch.Tensor.prelu")
def prelu(input: TensorProxy, weight: TensorProxy) -> Any:
    """x where x > 0, else weight * x: one weight, or one per channel (dim 1) broadcast over the rest."""
    check(
        isinstance(weight, TensorProxy) and weight.ndim <= 1,
        lambda: f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = {weight.ndim}{called_at()}",
        RuntimeError,
    )
    count = weight.numel()
    channels = input.shape[1] if input.ndim > 1 else 1
    check(
        count == 1 or count == channels,
        lambda: (
            f"prelu: Mismatch of parameter numbers and input channel size. Found parameter numbers = {count} and "
            f"channel size = {channels}.{called_at()}"
        ),
        RuntimeError,
    )
    if input.ndim > 1:
        weight = weight.reshape(-1, *([1] * (input.ndim - 2)))
    return elementwise(lambda x, w: prims.where(prims.gt(x, 0), x, prims.mul(w, x)), input, weight)


def _hardtanh(name: str, input: TensorProxy, min_val: Any, max_val: Any) -> Any:
    low, high = _scalar_for(name, input, min_val), _scalar_for(name, input, max_val)
    # NOTE: eager clamps, so a NaN bound makes every value NaN; adding NaN keeps the wheres' gradient,
    # which is eager's hardtanh_backward (a comparison with NaN is false).
    nan_bound = any(isinstance(b, float) and math.isnan(b) for b in (low, high))

    def body(x: Any) -> Any:
        y = prims.where(prims.le(x, low), low, prims.where(prims.ge(x, high), high, x))
        return prims.add(y, math.nan) if nan_bound else y

    return elementwise(body, input)


@register("torch.nn.functional.hardtanh")
def hardtanh(input: TensorProxy, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Any:
    """min_val where x <= min_val, max_val where x >= max_val, else x; integer tensors stay integer."""
    check(not min_val > max_val, lambda: f"hardtanh: min_val cannot be greater than max_val{called_at()}", ValueError)
    if inplace:
        return _in_place(F.hardtanh, input, min_val, max_val)
    return _hardtanh("hardtanh", input, min_val, max_val)


@register("torch.nn.functional.relu6")
def relu6(input: TensorProxy, inplace: bool = False) -> Any:
    """hardtanh(x, 0, 6): 0 and 6 themselves get a zero gradient, as eager."""
    if inplace:
        return _in_place(F.relu6, input)
    return _hardtanh("relu6", input, 0, 6)


@register("torch.threshold", "torch.nn.functional.threshold")
def threshold(input: TensorProxy, threshold: float, value: float, inplace: bool = False) -> Any:
    """value where x <= threshold, else x (whose gradient passes only where x > threshold)."""
    if inplace:
        return _in_place(F.threshold, input, threshold, value)
    bound, fill = _scalar_for("threshold", input, threshold), _scalar_for("threshold", input, value)
    # NOTE: bfloat16 and float16 compare in float32, as eager: the threshold is not rounded first.
    return elementwise(lambda x: prims.where(prims.le(x, bound), fill, x), input)


def _float_input(name: str, input: TensorProxy) -> TensorProxy:
    """`input`, checked to be a floating tensor (eager has no integer kernel for `name`)."""
    check(
        input.dtype.is_floating_point,
        lambda: f"{name} needs a floating tensor, got {input.dtype}{called_at()}",
        TypeError,
    )
    return input


def _softplus(x: Any, beta: float = 1.0, threshold: float = 20.0) -> Any:
    # NOTE: exp never sees values past `threshold`, so the branch where() drops never overflows (nor
    # its gradient); a where, not minimum(scaled, threshold), whose gradient would halve at a tie.
    scaled = prims.mul(x, beta)
    linear = prims.gt(scaled, threshold)
    soft = prims.div(prims.log1p(prims.exp(prims.where(linear, 0.0, scaled))), beta)
    return prims.where(linear, x, soft)


@register("torch.nn.functional.softplus")
def softplus(input: TensorProxy, beta: float = 1.0, threshold: float = 20.0) -> Any:
    """log1p(exp(beta * x)) / beta, and x itself where beta * x exceeds `threshold`."""
    return _float_unary(_float_input("softplus", input), lambda x: _softplus(x, beta, threshold))


@register("torch.nn.functional.logsigmoid")
def logsigmoid(input: TensorProxy) -> Any:
    """log(sigmoid(x)) as min(x, 0) - log1p(exp(-|x|)), which never overflows."""
    return _float_unary(
        _float_input("logsigmoid", input),
        lambda x: prims.sub(prims.minimum(x, 0.0), prims.log1p(prims.exp(prims.neg(prims.abs(x))))),
    )


@register("torch.nn.functional.mish")
def mish(input: TensorProxy, inplace: bool = False) -> Any:
    """x * tanh(softplus(x))."""
    if inplace:
        return _in_place(F.mish, input)
    return _float_unary(_float_input("mish", input), lambda x: prims.mul(x, prims.tanh(_softplus(x))))


# NOTE: hardsigmoid, hardswish and the ELUs pick their pieces with where, not minimum/maximum (whose
# gradient halves at a tie), so the gradient at a kink is eager's; NaN falls through to a NaN piece.


def _hardsigmoid(x: Any) -> Any:
    middle = prims.div(prims.add(x, 3.0), 6.0)
    return prims.where(prims.le(x, -3.0), 0.0, prims.where(prims.ge(x, 3.0), 1.0, middle))


def _hardswish(x: Any) -> Any:
    middle = prims.div(prims.mul(x, prims.add(x, 3.0)), 6.0)
    # NOTE: x * 0 below -3, as eager's x * relu6(x + 3) / 6: -inf gives NaN there.
    return prims.where(prims.le(x, -3.0), prims.mul(x, 0.0), prims.where(prims.lt(x, 3.0), middle, x))


@register("torch.nn.functional.hardsigmoid")
def hardsigmoid(input: TensorProxy, inplace: bool = False) -> Any:
    """min(max(x + 3, 0), 6) / 6."""
    if inplace:
        return _in_place(F.hardsigmoid, input)
    return _float_unary(_float_input("hardsigmoid", input), _hardsigmoid)


@register("torch.nn.functional.hardswish")
def hardswish(input: TensorProxy, inplace: bool = False) -> Any:
    """x * min(max(x + 3, 0), 6) / 6."""
    if inplace:
        return _in_place(F.hardswish, input)
    return _float_unary(_float_input("hardswish", input), _hardswish)


def _elu(x: Any, alpha: float, scale: float = 1.0, input_scale: float = 1.0) -> Any:
    # NOTE: exp sees only non-positive values, so the branch where() drops never overflows.
    non_positive = prims.le(x, 0.0)
    exp = prims.exp(prims.mul(prims.where(non_positive, x, 0.0), input_scale))
    return prims.where(non_positive, prims.mul(prims.sub(exp, 1.0), alpha * scale), prims.mul(x, scale))


@register("torch.nn.functional.elu")
def elu(input: TensorProxy, alpha: float = 1.0, inplace: bool = False) -> Any:
    """x where x > 0, else alpha * (exp(x) - 1)."""
    if inplace:
        return _in_place(F.elu, input, alpha)
    return _float_unary(_float_input("elu", input), lambda x: _elu(x, alpha))


@register("torch.nn.functional.celu")
def celu(input: TensorProxy, alpha: float = 1.0, inplace: bool = False) -> Any:
    """x where x > 0, else alpha * (exp(x / alpha) - 1)."""
    if inplace:
        return _in_place(F.celu, input, alpha)
    check(alpha != 0, lambda: f"celu: alpha must not be 0{called_at()}", ValueError)
    return _float_unary(_float_input("celu", input), lambda x: _elu(x, alpha, input_scale=1.0 / alpha))


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


@register("torch.nn.functional.selu")
def selu(input: TensorProxy, inplace: bool = False) -> Any:
    """scale * elu(x, alpha) with the self-normalising constants."""
    if inplace:
        return _in_place(F.selu, input)
    return _float_unary(_float_input("selu", input), lambda x: _elu(x, _SELU_ALPHA, scale=_SELU_SCALE))


@register("torch.nn.functional.glu")
def glu(input: TensorProxy, dim: int = -1) -> Any:
    """a * sigmoid(b), where a and b are the two halves of `input` along `dim`."""
    check(
        input.ndim > 0, lambda: f"glu does not support 0-d tensors: dim must have an even size{called_at()}", ValueError
    )
    _float_input("glu", input)
    d = canonical_dim(dim, input.ndim)
    size = input.shape[d]
    check(
        bool(size % 2 == 0),
        lambda: f"glu: the halved dim {d} must have an even size, got {size}{called_at()}",
        ValueError,
    )
    half = size // 2
    a, b = narrow(input, d, 0, half), narrow(input, d, half, half)
    compute, result = result_dtypes([input], Promotion.INT_TO_FLOAT)
    return to_dtype(prims.mul(to_dtype(a, compute), _sigmoid(to_dtype(b, compute))), result)
