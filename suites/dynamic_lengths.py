"""A transformer MLP block called with 20 sequence lengths: what changing tensor sizes cost each compiler.

`norm_mlp(x, w1, b1, w2, b2)` is x + fc2(GELU(fc1(layer_norm(x)))) over x of shape (batch, length,
channels). One sample is the whole sequence of 20 calls (lengths step x 2, 3, ..., 21: 128 to 1344
at GPU sizes, 2 to 21 quick) on a freshly compiled function, so recompilations are part of the time, as
in a server seeing requests of every length. Automatic dynamic makes the length symbolic once it
has changed: our compiler and torch.compile compile twice (1 recompilation) instead of 20 times.
Eager has no cache.

Bytes: each call reads x and writes an output of x's size, and reads the four weights.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from fusebench.cases import Case, Params, dtype_named, generator, random_tensor
from fusebench.integrations.asv_adapter import asv_benchmarks


def norm_mlp(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor) -> torch.Tensor:
    """A pre-norm transformer MLP block with its residual (layer norm without affine weights)."""
    h = F.gelu(F.linear(F.layer_norm(x, (x.shape[-1],)), w1, b1), approximate="tanh")
    return x + F.linear(h, w2, b2)


def run_lengths(fn: Any, args: tuple) -> list[Any]:
    """Calls `fn(x, *weights)` for the input of every length, in order; returns every result."""
    xs, weights = args
    return [fn(x, *weights) for x in xs]


def _lengths(params: Params) -> tuple[int, ...]:
    return tuple(params["step"] * k for k in range(2, 22))


def _inputs(params: Params, device: torch.device, seed: int) -> tuple:
    batch, channels, hidden = params["shape"]
    dtype, g = dtype_named(params["dtype"]), generator(seed)
    xs = [random_tensor((batch, length, channels), dtype, device, g) for length in _lengths(params)]
    weights = tuple(
        random_tensor(shape, dtype, device, g) * scale
        for shape, scale in (
            ((hidden, channels), channels**-0.5),
            ((hidden,), 0.1),
            ((channels, hidden), hidden**-0.5),
            ((channels,), 0.1),
        )
    )
    return xs, weights


def _bytes(params: Params) -> int:
    batch, channels, hidden = params["shape"]
    weights = 2 * hidden * channels + hidden + channels
    per_length = sum(2 * batch * length * channels + weights for length in _lengths(params))
    return per_length * dtype_named(params["dtype"]).itemsize


CASES = [
    Case(
        name="dynamic_lengths",
        fn=norm_mlp,
        make_inputs=_inputs,
        bytes_moved=_bytes,
        params={"shape": [(8, 1024, 4096)], "step": [64], "dtype": ["bfloat16"]},
        quick_params={"shape": [(2, 32, 64)], "step": [1], "dtype": ["float32"]},
        call=run_lengths,
        # bf16: room for eager's own error against the float64 reference at the full size
        tolerances={torch.bfloat16: (3e-2, 4e-2)},
        cold=True,
        timer="wall",
        description="a transformer MLP block over 20 sequence lengths from a fresh compile: time and recompilations",
    )
]

# ASV sees each case as benchmarks '<suite>.<case>.<metric>' (fusebench/integrations/asv_adapter.py).
globals().update(asv_benchmarks(__name__, CASES))
