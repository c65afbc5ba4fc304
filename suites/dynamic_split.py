"""split3 called with 20 different split sizes: what changing scalars cost each compiler.

`split3(a, d0, d1)` splits the last dimension of `a` into d0, d1 and the rest and applies a
different elementwise op to each part. One sample is the whole sequence of 20 calls (d0 = 1..20,
d1 = 8) on a freshly compiled function, so recompilations are part of the time. The `cache`
parameter (so named in ASV's history; `compiler.jit(numbers=...)`) picks how the sizes are
traced: "constant" bakes the sizes in until one changes, then
makes it symbolic (automatic dynamic: our compiler compiles twice, 1 recompilation), "symbolic"
keeps them as inputs from the start (one compilation). Eager has no cache and is measured once.

Why nvFuser would compile twice for our one definition: a slice whose symbolic extent is 1 at
run time (d0 = 1) is concretized by nvFuser as a broadcast dim, which is another kernel than the
one every other extent shares, so d0 = 1 would compile again whatever order the sizes came in.
Such a call runs with torch the first time its sizes are seen, and their kernel is compiled only
if they come back (compiler/executors/nvfuser/run/edge_sizes.py): one compilation per sequence.
That compilation (mostly nvFuser's lowering of the three resizes, NVRTC being skipped when the
on-disk kernel database has the kernel) is nearly all of a cold sequence's time; tracing and the
20 calls are a small part. Compiling in a background thread while torch runs the region does not
help with nvfuser_direct 0.2.36: its execute keeps the GIL while it compiles, so the caller's
Python waits all the same. Each sample starts without nvFuser's definitions (the harness clears
the process-wide cache), as in a fresh process.

Bytes: each call reads `a` once and writes outputs of `a`'s size: 20 x 2 x size of `a`.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from fusebench.cases import Case, Params, dtype_named, generator, random_tensor
from fusebench.integrations.asv_adapter import asv_benchmarks

SPLIT_SIZES = tuple((d0, 8) for d0 in range(1, 21))


def split3(a: torch.Tensor, d0: int, d1: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Splits the last dimension into (d0, d1, rest) and transforms each part."""
    d2 = a.size(2) - d0 - d1
    x, y, z = torch.split(a, (d0, d1, d2), dim=2)
    return x * 2, y + 1, z.sin()


def run_sequence(fn: Any, args: tuple) -> list[Any]:
    """Calls `fn(a, d0, d1)` for every split size of the sequence; returns every result."""
    a, sizes = args
    return [fn(a, d0, d1) for d0, d1 in sizes]


def _inputs(params: Params, device: torch.device, seed: int) -> tuple:
    a = random_tensor(params["shape"], dtype_named(params["dtype"]), device, generator(seed))
    return a, SPLIT_SIZES


def _bytes(params: Params) -> int:
    return len(SPLIT_SIZES) * 2 * math.prod(params["shape"]) * dtype_named(params["dtype"]).itemsize


CASES = [
    Case(
        name="dynamic_split",
        fn=split3,
        make_inputs=_inputs,
        bytes_moved=_bytes,
        params={"shape": [(8, 16, 4096)], "dtype": ["float32"], "cache": ["constant", "symbolic"]},
        quick_params={"shape": [(2, 4, 256)], "dtype": ["float32"], "cache": ["constant", "symbolic"]},
        call=run_sequence,
        jit_options=lambda params: {"cache": params["cache"]},
        cold=True,
        timer="wall",
        description="split3 over 20 split sizes from a fresh compile: total time and recompilations",
    )
]

# ASV sees each case as benchmarks '<suite>.<case>.<metric>' (fusebench/integrations/asv_adapter.py).
globals().update(asv_benchmarks(__name__, CASES))
