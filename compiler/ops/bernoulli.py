"""Bernoulli draws: `torch.bernoulli(p)` / `Tensor.bernoulli()` (each element 1 with the probability
the tensor holds), `torch.bernoulli(input, p)` (probability p, the input's shape and dtype) and
`Tensor.bernoulli_(p)` (the tensor filled with draws of probability p, a number or a tensor that
broadcasts to it: timm's DropPath writes `x.new_empty(shape).bernoulli_(keep_prob)`).

Each is a uniform draw u in [0, 1) from torch's default generator (ops/random.py) compared with
the probability: 1 where u < p. p = 0 gives zeros and p = 1 ones exactly, as in eager; eager's
kernels draw otherwise, so the values differ from eager's under the same seed (the distribution
does not).
"""

from __future__ import annotations

from typing import Any

import torch

from compiler.core import dtypes
from compiler.core.errors import called_at, check
from compiler.core.ir import NumberProxy, TensorProxy
from compiler.ops.random import _random_values
from compiler.ops.registry import register
from compiler.ops.writes import write


def _draw(name: str, input: TensorProxy, p: Any, dtype: torch.dtype, generator: Any) -> TensorProxy:
    """Draws of probability `p` (a number, or a tensor broadcasting to `input`) in `input`'s shape, as `dtype`."""
    check(
        isinstance(input, TensorProxy),
        lambda: f"{name}: expected a tensor, got {type(input).__name__}{called_at()}",
        TypeError,
    )
    if isinstance(p, TensorProxy):
        check(
            dtypes.is_float(p.dtype),
            lambda: f"{name}: expected a floating point tensor of probabilities, got {p.dtype}{called_at()}",
            TypeError,
        )
    else:
        check(
            isinstance(p, (int, float, NumberProxy)) and not isinstance(p, bool),
            lambda: f"{name}: p must be a number or a tensor, got {type(p).__name__}{called_at()}",
            TypeError,
        )
        check(
            isinstance(p, NumberProxy) or 0 <= p <= 1,
            lambda: f"{name} expects p to be in [0, 1], but got p={p}{called_at()}",
            RuntimeError,
        )
    draw_dtype = torch.float64 if torch.float64 in (dtype, getattr(p, "dtype", None)) else torch.float32
    u = _random_values(name, "uniform", list(input.shape), draw_dtype, input.device, generator)
    return torch.lt(u, p).to(dtype)


@register("torch.bernoulli", "torch.Tensor.bernoulli")
def bernoulli(input: TensorProxy, p: Any = None, *, generator: Any = None, out: Any = None) -> TensorProxy:
    """Without `p`: 1 with the probability each element of `input` holds, else 0 (`input`'s dtype);
    with `p`: draws of probability `p` in `input`'s shape and dtype."""
    check(out is None, lambda: f"torch.bernoulli: out= is not supported{called_at()}", NotImplementedError)
    if p is None:
        check(
            isinstance(input, TensorProxy) and dtypes.is_float(input.dtype),
            lambda: f"torch.bernoulli: expected a floating point tensor of probabilities{called_at()}",
            TypeError,
        )
        return _draw("torch.bernoulli", input, input, input.dtype, generator)
    return _draw("torch.bernoulli", input, p, input.dtype, generator)


@register("torch.Tensor.bernoulli_")
def bernoulli_(input: TensorProxy, p: Any = 0.5, *, generator: Any = None) -> TensorProxy:
    """`input` overwritten with draws of probability `p` (a number or a tensor broadcasting to it)."""
    values = _draw("Tensor.bernoulli_", input, p, input.dtype, generator)
    return write(input, values, "torch.Tensor.bernoulli_")
