"""Inverse trigonometric functions: acos, asin, atan (and their `arc*` spellings).

Each is `prims.atan2` of the right pair, so no new prim is needed and nvFuser fuses them: with
c = sqrt(1 - x) * sqrt(1 + x), asin(x) = atan2(x, c), acos(x) = atan2(c, x), atan(x) = atan2(x, 1).
Writing sqrt(1 - x^2) so keeps its digits near |x| = 1 (1 - x * x would lose them), and its
derivative at the end points is eager's infinity (the product (1 - x)(1 + x) under one root would
give 0 * inf there); outside [-1, 1] a root is NaN, and so is the result, as in eager; signed
zeros and the end points (acos(-1) = pi, asin(1) = pi / 2) come out of atan2 exactly. Integer and bool inputs
give the default float dtype; bf16/f16 compute in float32 and round once. The in-place forms are in inplace.py.
"""

from __future__ import annotations

from typing import Any

from compiler import prims
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy
from compiler.ops.operands import Promotion, check_no_out, elementwise
from compiler.ops.registry import register


def _tensor(name: str, input: Any) -> None:
    check(
        isinstance(input, TensorProxy),
        lambda: f"{name}: expected a tensor, got {type(input).__name__} {input!r}{called_at()}",
        TypeError,
    )


def _cosine_of_asin(x: Any) -> Any:
    """sqrt(1 - x^2) as sqrt(1 - x) * sqrt(1 + x) (see the module docstring)."""
    return prims.mul(prims.sqrt(prims.sub(1.0, x)), prims.sqrt(prims.add(1.0, x)))


@register("torch.acos", "torch.arccos", "torch.Tensor.acos", "torch.Tensor.arccos")
def acos(input: TensorProxy, *, out: Any = None) -> Any:
    check_no_out("torch.acos", out)
    _tensor("torch.acos", input)
    return elementwise(lambda x: prims.atan2(_cosine_of_asin(x), x), input, promotion=Promotion.INT_TO_FLOAT)


@register("torch.asin", "torch.arcsin", "torch.Tensor.asin", "torch.Tensor.arcsin")
def asin(input: TensorProxy, *, out: Any = None) -> Any:
    check_no_out("torch.asin", out)
    _tensor("torch.asin", input)
    return elementwise(lambda x: prims.atan2(x, _cosine_of_asin(x)), input, promotion=Promotion.INT_TO_FLOAT)


@register("torch.atan", "torch.arctan", "torch.Tensor.atan", "torch.Tensor.arctan")
def atan(input: TensorProxy, *, out: Any = None) -> Any:
    check_no_out("torch.atan", out)
    _tensor("torch.atan", input)
    return elementwise(lambda x: prims.atan2(x, 1.0), input, promotion=Promotion.INT_TO_FLOAT)
