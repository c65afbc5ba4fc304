"""Negative log-likelihood losses of a distribution's parameters: poisson_nll_loss, gaussian_nll_loss.

Written as calls of torch ops on the proxies in eager's steps (gaussian_nll_loss clamps a copy of
`var` at `eps` without recording it, so its gradient reaches `var` unmasked, as eager's does).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy
from compiler.ops.margin_losses import reduced
from compiler.ops.nn import _reduction
from compiler.ops.registry import register


@register("torch.nn.functional.poisson_nll_loss")
def poisson_nll_loss(
    input: TensorProxy,
    target: TensorProxy,
    log_input: bool = True,
    full: bool = False,
    size_average: Any = None,
    eps: float = 1e-8,
    reduce: Any = None,
    reduction: str = "mean",
) -> TensorProxy:
    """exp(input) - target * input (log_input), else input - target * log(input + eps); `full` adds
    Stirling's approximation of log(target!) where target > 1."""
    reduction = _reduction("poisson_nll_loss", size_average, reduce, reduction)
    loss = torch.exp(input) - target * input if log_input else input - target * torch.log(input + eps)
    if full:
        stirling = target * torch.log(target) - target + 0.5 * torch.log(2 * math.pi * target)
        loss = loss + stirling.masked_fill(target <= 1, 0)
    return reduced(loss, reduction)


def _variance_like(input: TensorProxy, var: TensorProxy) -> TensorProxy:
    """`var` shaped to broadcast against `input`, with eager's size checks: the same shape, one dim
    short at the end (unsqueezed), or one dim of size 1 where the input's differs."""
    if tuple(var.shape) == tuple(input.shape):
        return var
    if tuple(input.shape[:-1]) == tuple(var.shape):
        return var.unsqueeze(-1)
    single = input.ndim == var.ndim and sum(v for i, v in zip(input.shape, var.shape) if i != v) == 1
    check(single, lambda: f"gaussian_nll_loss: var is of incorrect size{called_at()}", ValueError)
    return var


@register("torch.nn.functional.gaussian_nll_loss")
def gaussian_nll_loss(
    input: TensorProxy,
    target: TensorProxy,
    var: TensorProxy | float,
    full: bool = False,
    eps: float = 1e-6,
    reduction: str = "mean",
) -> TensorProxy:
    """0.5 (log(v) + (input - target)^2 / v) with v = max(var, eps) (`full`: + 0.5 log(2 pi)).

    NOTE: eager raises where `var` holds a negative entry; that needs its values, which tracing does
    not have: a negative tensor entry is clamped to `eps` like a small one.
    """
    if isinstance(var, (int, float)):
        check(var >= 0, lambda: f"gaussian_nll_loss: var has negative entry/entries{called_at()}", ValueError)
        var = var * torch.ones_like(input)
    var = _variance_like(input, var)
    check(
        reduction in ("none", "mean", "sum"),
        lambda: f"gaussian_nll_loss: {reduction} is not valid{called_at()}",
        ValueError,
    )
    var = var.clone()
    with torch.no_grad():
        var.clamp_(min=eps)
    loss = 0.5 * (torch.log(var) + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return reduced(loss, reduction)
