"""Arithmetic and layout ops on complex values, as torch calls on their parts (see complex_numbers.py).

Elementwise: `a + b`, `a - b`, `a * b`, `a / b` with complex, real tensor and Python number
operands ((a + bi)(c + di) = (ac - bd) + (ad + bc)i, ...), `neg`, `conj`, `exp`, `log`, `abs`
(`hypot` of the parts), `angle` (`atan2`), `reciprocal`, `square`, `pow` by a real number,
`where`, `==` and `!=`. Layout ops and the linear reductions (`sum`, `mean`) apply to each part
alike; `cat` and `stack` take complex and real tensors together, as torch does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from compiler.core.errors import called_at, check
from compiler.core.proxies import TensorProxy
from compiler.ops.complex_numbers import (
    add_parts,
    as_complex,
    is_number,
    make,
    mul_parts,
    parts,
    result_dtype,
    sub_parts,
)
from compiler.ops.complex_proxy import ComplexProxy, call
from compiler.ops.registry import register_complex, resolve


def _operands(a: Any, b: Any) -> tuple[tuple, tuple]:
    part_dtype = result_dtype(a, b).to_real()
    return parts(a, part_dtype), parts(b, part_dtype)


def _scaled(value: Any, alpha: Any) -> Any:
    return value if alpha is None else value * alpha


@register_complex("torch.add", "torch.Tensor.add", "torch.Tensor.__add__", "torch.Tensor.__radd__")
def add(input: Any, other: Any, *, alpha: Any = None) -> ComplexProxy:
    (ar, ai), (br, bi) = _operands(input, _scaled(other, alpha))
    return make(add_parts(ar, br), add_parts(ai, bi), like=input)


@register_complex("torch.sub", "torch.subtract", "torch.Tensor.sub", "torch.Tensor.__sub__")
def sub(input: Any, other: Any, *, alpha: Any = None) -> ComplexProxy:
    (ar, ai), (br, bi) = _operands(input, _scaled(other, alpha))
    return make(sub_parts(ar, br), sub_parts(ai, bi), like=input)


@register_complex("torch.rsub", "torch.Tensor.__rsub__")
def rsub(input: Any, other: Any, *, alpha: Any = None) -> ComplexProxy:
    return sub(other, _scaled(input, alpha))


@register_complex("torch.mul", "torch.multiply", "torch.Tensor.mul", "torch.Tensor.__mul__", "torch.Tensor.__rmul__")
def mul(input: Any, other: Any) -> ComplexProxy:
    (ar, ai), (br, bi) = _operands(input, other)
    real = sub_parts(mul_parts(ar, br), mul_parts(ai, bi))
    imag = add_parts(mul_parts(ar, bi), mul_parts(ai, br))
    return make(real, imag, like=input)


@register_complex(
    "torch.div", "torch.divide", "torch.true_divide", "torch.Tensor.div", "torch.Tensor.true_divide",
    "torch.Tensor.__truediv__",
)  # fmt: skip
def div(input: Any, other: Any, *, rounding_mode: str | None = None) -> ComplexProxy:
    check(
        rounding_mode is None,
        lambda: f"division of complex tensors with rounding_mode={rounding_mode!r}{called_at()}",
        NotImplementedError,
    )
    (ar, ai), (br, bi) = _operands(input, other)
    if bi is None:
        return make(ar / br, None if ai is None else ai / br, like=input)
    denominator = br * br + bi * bi
    real = add_parts(mul_parts(ar, br), mul_parts(ai, bi))
    imag = sub_parts(mul_parts(ai, br), mul_parts(ar, bi))
    return make(real / denominator, imag / denominator, like=other)


@register_complex("torch.Tensor.__rtruediv__")
def rtruediv(input: Any, other: Any) -> ComplexProxy:
    return div(other, input)


@register_complex("torch.neg", "torch.negative", "torch.Tensor.neg", "torch.Tensor.__neg__")
def neg(input: Any) -> ComplexProxy:
    value = as_complex(input, "torch.neg")
    return ComplexProxy(-value.real, -value.imag)


@register_complex("torch.Tensor.__pos__", "torch.resolve_conj", "torch.Tensor.resolve_conj", "torch.resolve_neg",
                  "torch.Tensor.resolve_neg")  # fmt: skip
def same(input: Any) -> Any:
    return input


@register_complex("torch.conj", "torch.Tensor.conj", "torch.conj_physical", "torch.Tensor.conj_physical")
def conj(input: Any) -> ComplexProxy:
    value = as_complex(input, "torch.conj")
    return ComplexProxy(value.real, -value.imag)


@register_complex("torch.exp", "torch.Tensor.exp")
def exp(input: Any) -> ComplexProxy:
    value = as_complex(input, "torch.exp")
    magnitude = torch.exp(value.real)
    return ComplexProxy(magnitude * torch.cos(value.imag), magnitude * torch.sin(value.imag))


@register_complex("torch.log", "torch.Tensor.log")
def log(input: Any) -> ComplexProxy:
    value = as_complex(input, "torch.log")
    return ComplexProxy(torch.log(abs_(value)), angle(value))


@register_complex("torch.abs", "torch.absolute", "torch.Tensor.abs", "torch.Tensor.absolute", "torch.Tensor.__abs__")
def abs_(input: Any) -> TensorProxy:
    value = as_complex(input, "torch.abs")
    return torch.hypot(value.real, value.imag)


@register_complex("torch.angle", "torch.Tensor.angle")
def angle(input: Any) -> TensorProxy:
    value = as_complex(input, "torch.angle")
    return torch.atan2(value.imag, value.real)


@register_complex("torch.reciprocal", "torch.Tensor.reciprocal")
def reciprocal(input: Any) -> ComplexProxy:
    return div(1.0, as_complex(input, "torch.reciprocal"))


@register_complex("torch.square", "torch.Tensor.square")
def square(input: Any) -> ComplexProxy:
    return mul(input, input)


@register_complex("torch.pow", "torch.Tensor.pow", "torch.Tensor.__pow__")
def pow_(input: Any, exponent: Any) -> ComplexProxy:
    value = as_complex(input, "torch.pow")
    check(
        is_number(exponent) and type(exponent) is not complex,
        lambda: f"torch.pow of a complex tensor by {type(exponent).__name__}: only real numbers{called_at()}",
        NotImplementedError,
    )
    if type(exponent) is int and 0 <= exponent <= 4:  # NOTE: exact, and differentiable at zero
        result = make(1.0, None, like=value)
        for _ in range(exponent):
            result = mul(result, value)
        return result
    magnitude, phase = abs_(value) ** exponent, angle(value) * exponent
    return ComplexProxy(magnitude * torch.cos(phase), magnitude * torch.sin(phase))


@register_complex("torch.where", "torch.Tensor.where")
def where(condition: Any, input: Any, other: Any) -> ComplexProxy:
    if isinstance(condition, ComplexProxy):  # NOTE: Tensor.where(self, condition, other)
        condition, input = input, condition
    (ar, ai), (br, bi) = _operands(input, other)
    imag = None
    if ai is not None or bi is not None:
        imag = torch.where(condition, 0.0 if ai is None else ai, 0.0 if bi is None else bi)
    return make(torch.where(condition, ar, br), imag, like=input)


@register_complex("torch.eq", "torch.Tensor.eq", "torch.Tensor.__eq__")
def eq(input: Any, other: Any) -> TensorProxy:
    (ar, ai), (br, bi) = _operands(input, other)
    return (ar == br) & ((0.0 if ai is None else ai) == (0.0 if bi is None else bi))


@register_complex("torch.ne", "torch.Tensor.ne", "torch.Tensor.__ne__")
def ne(input: Any, other: Any) -> TensorProxy:
    return ~eq(input, other)


@register_complex("torch.is_complex")
def is_complex(input: Any) -> bool:
    return isinstance(input, ComplexProxy)


# layout ops and linear reductions: the same op on each part ------------------------------------------
def _pairs(real: Any, imag: Any) -> Any:
    if isinstance(real, TensorProxy):
        return ComplexProxy(real, imag)
    return type(real)(ComplexProxy(r, i) for r, i in zip(real, imag))


def _partwise(fn: Callable, name: str) -> Callable:
    def on_parts(input: Any, *args: Any, **kwargs: Any) -> Any:
        # NOTE: another complex operand only lends its shape (`view_as`, `expand_as`)
        args = tuple(a.real if isinstance(a, ComplexProxy) else a for a in args)
        if not isinstance(input, ComplexProxy):
            return call(fn, input, *args, **kwargs)
        check(
            kwargs.get("dtype") is None and not any(isinstance(a, torch.dtype) for a in args),
            lambda: f"{name} with a dtype on a complex tensor is not supported{called_at()}",
            NotImplementedError,
        )
        return _pairs(call(fn, input.real, *args, **kwargs), call(fn, input.imag, *args, **kwargs))

    return on_parts


_PARTWISE = (
    "view", "reshape", "flatten", "unflatten", "unsqueeze", "squeeze", "permute", "transpose", "swapaxes",
    "movedim", "moveaxis", "expand", "expand_as", "broadcast_to", "contiguous", "clone", "detach",
    "__getitem__", "select", "narrow", "split", "chunk", "unbind", "repeat", "tile", "flip", "roll", "t",
    "diagonal", "view_as", "reshape_as", "sum", "mean", "cumsum", "tril", "triu", "index_select",
)  # fmt: skip
for _name in _PARTWISE:
    for _owner, _namespace in (("torch.Tensor", torch.Tensor), ("torch", torch)):
        if hasattr(_namespace, _name):
            _qualified = f"{_owner}.{_name}"
            register_complex(_qualified)(_partwise(resolve(_qualified), _qualified))


def _joined(fn: Callable, tensors: Any, dim: int) -> ComplexProxy:
    part_dtype = result_dtype(*tensors).to_real()
    split = [parts(t, part_dtype) for t in tensors]
    reals = [r for r, _ in split]
    imags = [torch.zeros_like(r) if i is None else i for r, i in split]
    return ComplexProxy(call(fn, reals, dim), call(fn, imags, dim))


@register_complex("torch.cat", "torch.concat", "torch.concatenate")
def cat(tensors: Any, dim: int = 0) -> ComplexProxy:
    return _joined(torch.cat, tensors, dim)


@register_complex("torch.stack")
def stack(tensors: Any, dim: int = 0) -> ComplexProxy:
    return _joined(torch.stack, tensors, dim)
