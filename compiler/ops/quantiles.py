"""torch.quantile and torch.nanquantile, read off the sorted values as eager does.

Along the reduced dim the values are sorted (NaN last); quantile q sits at rank q * (n - 1), n the
count (nanquantile: of the values that are not NaN; quantile: a row holding NaN takes rank n - 1, a
NaN). "linear" interpolates between the values below and above that rank with eager's lerp,
"midpoint" halfway, "lower" / "higher" / "nearest" (ties to even) take one of them. A tensor q gives
one leading dim of results per quantile.
"""

from __future__ import annotations

from typing import Any

import torch

from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy
from compiler.ops.operands import canonical_dim
from compiler.ops.registry import register

_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _check(op: str, input: Any, q: Any, interpolation: str) -> None:
    check(
        isinstance(input, TensorProxy) and input.dtype in (torch.float32, torch.float64),
        lambda: f"{op}() input tensor must be either float or double dtype{called_at()}",
        RuntimeError,
    )
    check(
        interpolation in _INTERPOLATIONS,
        lambda: (
            f"{op}() interpolation must be one of linear, lower, higher, midpoint or nearest. Found "
            f"{interpolation}{called_at()}"
        ),
        RuntimeError,
    )
    if isinstance(q, TensorProxy):
        check(
            q.ndim <= 1 and q.dtype == input.dtype,
            lambda: f"{op}() q must be a scalar or 1D tensor of the input's dtype, got {q!r}{called_at()}",
            RuntimeError,
        )
    else:
        check(
            isinstance(q, (int, float)) and 0 <= q <= 1,
            lambda: f"{op}() q must be in the range [0, 1] but got {q}{called_at()}",
            RuntimeError,
        )


def _quantile(
    op: str, input: Any, q: Any, dim: Any, keepdim: bool, interpolation: str, ignore_nan: bool
) -> TensorProxy:
    _check(op, input, q, interpolation)
    if dim is None or input.ndim == 0:
        rows, kept = input.reshape(-1), [1] * input.ndim
    else:
        d = canonical_dim(dim, input.ndim)
        rows, kept = input.movedim(d, -1), [1 if i == d else s for i, s in enumerate(input.shape)]
    values = rows.sort(-1).values
    last = values.shape[-1] - 1
    quantiles = q.reshape(-1) if isinstance(q, TensorProxy) else input.new_full((1,), q)
    if ignore_nan:
        ranks = quantiles * ((~values.isnan()).sum(-1, keepdim=True) - 1)
        ranks = ranks.masked_fill(ranks < 0, 0)
    else:
        ranks = (quantiles * last).masked_fill(values.isnan().any(-1, keepdim=True), last)
    if interpolation in ("lower", "higher", "nearest"):
        ranks = {"lower": torch.floor, "higher": torch.ceil, "nearest": torch.round}[interpolation](ranks)
    below = ranks.long()
    result = values.gather(-1, below)
    if interpolation in ("linear", "midpoint"):
        weights = torch.full_like(ranks, 0.5) if interpolation == "midpoint" else ranks - below
        result = torch.lerp(result, values.gather(-1, ranks.ceil().long()), weights)
    if keepdim:
        shape = kept
    else:
        shape = [] if dim is None else [s for i, s in enumerate(input.shape) if i != canonical_dim(dim, input.ndim)]
        shape = shape if input.ndim else []
    result = result.movedim(-1, 0)
    if not isinstance(q, TensorProxy) or q.ndim == 0:
        return result.reshape(shape)
    return result.reshape([quantiles.shape[0], *shape])


@register("torch.quantile", "torch.Tensor.quantile")
def quantile(
    input: TensorProxy,
    q: Any,
    dim: Any = None,
    keepdim: bool = False,
    *,
    interpolation: str = "linear",
    out: Any = None,
) -> TensorProxy:
    """The q-th quantiles of `input` along `dim` (of every value when None); NaN where a row has NaN."""
    check(out is None, lambda: f"torch.quantile: out= is not supported{called_at()}", NotImplementedError)
    return _quantile("quantile", input, q, dim, keepdim, interpolation, ignore_nan=False)


@register("torch.nanquantile", "torch.Tensor.nanquantile")
def nanquantile(
    input: TensorProxy,
    q: Any,
    dim: Any = None,
    keepdim: bool = False,
    *,
    interpolation: str = "linear",
    out: Any = None,
) -> TensorProxy:
    """torch.quantile ignoring NaN values (NaN only where a row is all NaN)."""
    check(out is None, lambda: f"torch.nanquantile: out= is not supported{called_at()}", NotImplementedError)
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, ignore_nan=True)
