"""Activation functions: sigmoid, SiLU, GELU (erf and tanh), ReLU, written with prims.

Each computes in its float compute dtype (bf16/f16 in float32) and rounds once at the end.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from compiler import prims
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy
from compiler.ops.operands import Promotion, check_no_out, elementwise, result_dtypes, to_dtype
from compiler.ops.registry import register


def _float_unary(x: TensorProxy, body: Callable[[Any], Any]) -> Any:
    """Applies `body` (written with prims) to `x` in its compute dtype and rounds once."""
    compute, result = result_dtypes([x], Promotion.INT_TO_FLOAT)
    y = body(to_dtype(x, compute))
    return to_dtype(y, result)


def _sigmoid(x: Any) -> Any:
    return prims.reciprocal(prims.add(prims.exp(prims.neg(x)), 1.0))


# NOTE: torch.nn.functional.sigmoid is not registered: it calls input.sigmoid(), which is.
@register("torch.sigmoid", "torch.Tensor.sigmoid", "torch.special.expit")
def sigmoid(input: TensorProxy, *, out: Any = None) -> Any:
    check_no_out("torch.sigmoid", out)
    return _float_unary(input, _sigmoid)


@register("torch.nn.functional.silu")
def silu(input: TensorProxy, inplace: bool = False) -> Any:
    check(not inplace, lambda: f"silu(inplace=True) is not supported{called_at()}", NotImplementedError)
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
    check(not inplace, lambda: f"relu(inplace=True) is not supported{called_at()}", NotImplementedError)
    check(input.dtype != torch.bool, lambda: f"relu is not defined for bool tensors{called_at()}", TypeError)
    # NOTE: a where, not maximum(x, 0), so the gradient at exactly 0 is 0 as eager's threshold_backward
    # gives (maximum's rule splits a tie in halves); NaN stays NaN.
    return elementwise(lambda x: prims.where(prims.le(x, 0), 0, x), input)
