"""The trapezoidal rule along a dim: torch.trapezoid and its older name torch.trapz.

With sample points `x`, the sum of (x[i + 1] - x[i]) * (y[i] + y[i + 1]) / 2 (a 1-D `x` lies along
`dim`; another is broadcast against `y` after the differences are taken, as NumPy's); with a constant
spacing `dx`, eager's rearranged (sum(y) - (y[0] + y[-1]) / 2) * dx. Zero samples integrate to zeros
of y's dtype.
"""

from __future__ import annotations

from typing import Any

import torch

from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy
from compiler.ops.operands import canonical_dim
from compiler.ops.registry import register


def _zeros_without(y: TensorProxy, dim: int) -> TensorProxy:
    shape = [s for d, s in enumerate(y.shape) if d != dim]
    return y.new_zeros(shape)


def _with_spacing(y: TensorProxy, dx: float, dim: int) -> TensorProxy:
    return (y.sum(dim) - (y.select(dim, 0) + y.select(dim, -1)) * 0.5) * dx


def _with_points(y: TensorProxy, x: TensorProxy, dim: int) -> TensorProxy:
    if x.ndim == 1:
        check(
            x.shape[0] == y.shape[dim],
            lambda: f"trapezoid: There must be one `x` value for each sample point{called_at()}",
            RuntimeError,
        )
        x = x.reshape([x.shape[0] if d == dim else 1 for d in range(y.ndim)])
    elif x.ndim < y.ndim:
        x = x.reshape([1] * (y.ndim - x.ndim) + list(x.shape))
    length = x.shape[dim] - 1
    dx = x.narrow(dim, 1, length) - x.narrow(dim, 0, length)
    return (dx * (y.narrow(dim, 0, y.shape[dim] - 1) + y.narrow(dim, 1, y.shape[dim] - 1)) / 2.0).sum(dim)


@register("torch.trapezoid", "torch.trapz")
def trapezoid(y: TensorProxy, x: Any = None, *, dx: Any = None, dim: int = -1) -> TensorProxy:
    """The integral of `y` along `dim` by the trapezoidal rule, at the points `x` or every `dx` (default 1)."""
    check(
        isinstance(y, TensorProxy) and y.dtype != torch.bool,
        lambda: f"trapezoid: received a bool input for `y`, but bool is not supported{called_at()}",
        RuntimeError,
    )
    check(
        (x is None or isinstance(x, TensorProxy)) and (x is None or dx is None),
        lambda: f"trapezoid: expected the sample points x as a tensor or the spacing dx, not both{called_at()}",
        TypeError,
    )
    d = canonical_dim(dim, y.ndim)
    if y.shape[d] == 0:
        return _zeros_without(y, d)
    if isinstance(x, TensorProxy):
        check(x.dtype != torch.bool, lambda: f"trapezoid: x must not be a bool tensor{called_at()}", RuntimeError)
        return _with_points(y, x, d)
    spacing = 1 if dx is None else dx
    check(
        isinstance(spacing, (int, float)) and not isinstance(spacing, bool),
        lambda: f"trapezoid: Currently, we only support dx as a real number.{called_at()}",
        RuntimeError,
    )
    return _with_spacing(y, spacing, d)
