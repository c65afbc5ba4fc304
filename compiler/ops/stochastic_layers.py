"""Layers whose training mode draws noise: rrelu, alpha_dropout, feature_alpha_dropout, gumbel_softmax.

In eval mode rrelu is leaky_relu with the mean slope and the alpha dropouts are the identity.
Training draws from torch's default generator with eager's calls, so a seeded program gives eager's
values: the alpha dropouts fill their noise as eager's `bernoulli_` does (`prims.dropout_noise`,
whose kept elements say where eager's noise is 1), gumbel_softmax its `exponential_` draw.
rrelu in training draws one slope per negative element only, a number of draws that depends on
the values: refused.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from compiler import prims
from compiler.core import dtypes
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy
from compiler.ops.activations import leaky_relu
from compiler.ops.inplace import apply_in_place
from compiler.ops.operands import to_dtype
from compiler.ops.random import _noise_like
from compiler.ops.registry import register
from compiler.ops.writes import write

# NOTE: SELU's alpha * scale, the value alpha dropout sets a dropped element to before its affine fix-up
_SELU_NEGATIVE_SATURATION = 1.7580993408473766


def _rrelu(name: str, input: TensorProxy, lower: float, upper: float, training: bool) -> TensorProxy:
    check(
        not training,
        lambda: (
            f"{name}: training=True is not supported: eager draws a random slope for each negative element "
            f"only, a number of draws that depends on the values; use training=False{called_at()}"
        ),
        NotImplementedError,
    )
    return leaky_relu(input, (lower + upper) / 2)


@register("torch.nn.functional.rrelu")
def rrelu(
    input: TensorProxy, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False, inplace: bool = False
) -> Any:
    """Eval mode: leaky_relu with the slope (lower + upper) / 2."""
    if inplace:
        return apply_in_place(torch.rrelu, input, (lower, upper, training), {}, "rrelu(inplace=True)")
    return _rrelu("rrelu", input, lower, upper, training)


@register("torch.rrelu")
def rrelu_function(
    input: TensorProxy, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False, generator: Any = None
) -> Any:
    """torch.rrelu: F.rrelu's eval mode (a generator only matters in training)."""
    return _rrelu("torch.rrelu", input, lower, upper, training)


@register("torch.rrelu_")
def rrelu_(
    input: TensorProxy, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False, generator: Any = None
) -> Any:
    """torch.rrelu_: `input` overwritten with its eval-mode rrelu."""
    return apply_in_place(torch.rrelu, input, (lower, upper, training), {}, "torch.rrelu_")


def _alpha_dropout(name: str, input: TensorProxy, p: float, training: bool, feature: bool) -> TensorProxy:
    """Eager's alpha dropout: with keep = 1 where its noise kept the element, 0 where dropped (drawn
    per (sample, channel) for the feature form), a = 1 / sqrt((alpha^2 p + 1)(1 - p)), the result is
    input * keep * a + (keep - 1) * alpha * a + alpha * a * p, computed in eager's order."""
    check(
        isinstance(p, (int, float)) and 0.0 <= p <= 1.0,
        lambda: f"{name}: dropout probability has to be between 0 and 1, but got {p!r}{called_at()}",
        ValueError,
    )
    check(
        isinstance(input, TensorProxy) and dtypes.is_float(input.dtype),
        lambda: f"{name}: expected a floating point tensor, got {getattr(input, 'dtype', input)!r}{called_at()}",
        TypeError,
    )
    if not training or p == 0 or input.numel() == 0:
        return input
    if p == 1:
        return input * 0.0
    if feature:
        check(
            input.ndim >= 2,
            lambda: f"{name}: Feature dropout requires at least 2 dimensions in the input{called_at()}",
            RuntimeError,
        )
        shape = [*input.shape[:2], *([1] * (input.ndim - 2))]
        noise = prims.dropout_noise(shape, float(p), input.dtype, input.device)
    else:
        noise = _noise_like(input, float(p))
    keep = to_dtype(prims.ne(noise, 0.0), input.dtype)
    alpha = _SELU_NEGATIVE_SATURATION
    a = 1.0 / math.sqrt((alpha * alpha * p + 1) * (1 - p))
    shift = (keep - 1.0) * (alpha * a) + alpha * a * p
    return input * (keep * a) + shift


@register("torch.nn.functional.alpha_dropout")
def alpha_dropout(input: TensorProxy, p: float = 0.5, training: bool = False, inplace: bool = False) -> Any:
    """Dropout that keeps SELU's self-normalising mean and variance (identity in eval mode)."""
    out = _alpha_dropout("alpha_dropout", input, p, training, feature=False)
    return write(input, out, "alpha_dropout(inplace=True)") if inplace and out is not input else out


@register("torch.alpha_dropout")
def alpha_dropout_function(input: TensorProxy, p: float, train: bool) -> Any:
    return _alpha_dropout("torch.alpha_dropout", input, p, train, feature=False)


@register("torch.nn.functional.feature_alpha_dropout")
def feature_alpha_dropout(input: TensorProxy, p: float = 0.5, training: bool = False, inplace: bool = False) -> Any:
    """Alpha dropout of whole channels (dims 0 and 1 draw; identity in eval mode)."""
    out = _alpha_dropout("feature_alpha_dropout", input, p, training, feature=True)
    return write(input, out, "feature_alpha_dropout(inplace=True)") if inplace and out is not input else out


@register("torch.feature_alpha_dropout")
def feature_alpha_dropout_function(input: TensorProxy, p: float, train: bool) -> Any:
    return _alpha_dropout("torch.feature_alpha_dropout", input, p, train, feature=True)


@register("torch.nn.functional.gumbel_softmax")
def gumbel_softmax(
    logits: TensorProxy, tau: float = 1.0, hard: bool = False, eps: float = 1e-10, dim: int = -1
) -> TensorProxy:
    """softmax((logits - log(E)) / tau) with E drawn as eager's `exponential_` draws it (row-major);
    `hard`: the one-hot of its largest value, with the soft sample's gradient (straight through)."""
    check(
        isinstance(logits, TensorProxy) and dtypes.is_float(logits.dtype),
        lambda: (
            f"gumbel_softmax: expected floating point logits, got {getattr(logits, 'dtype', logits)!r}{called_at()}"
        ),
        TypeError,
    )
    exponential = prims.random_values(list(logits.shape), "exponential", logits.dtype, logits.device)
    y_soft = ((logits - exponential.log()) / tau).softmax(dim)
    if not hard:
        return y_soft
    index = y_soft.max(dim, keepdim=True)[1]
    y_hard = torch.zeros_like(logits).scatter_(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft
