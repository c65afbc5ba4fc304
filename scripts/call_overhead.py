"""Per-call host overhead of a jitted function, split into prologue, computation and wrapper.

    OMP_NUM_THREADS=1 PYTHONPATH=. python scripts/call_overhead.py [--program 1-op] [--device cpu] [--cuda-graphs]

For each program of suites/host_overhead.py (a 4-element tensor) it prints, in microseconds per
call (each the fastest of many batches of calls after warm-up, or with --statistic median their
median; the fastest is the steadier estimate on a loaded machine):
- eager: the function as written;
- jit: the jitted function, the whole call;
- prologue: the cache entry's guards alone (`entry.prologue(args, kwargs)`);
- computation: the entry's generated computation alone (`entry.computation(*inputs)`);
- wrapper: jit - prologue - computation: what the call adds to its guards and computation run
  apart (the call into the dispatcher, counting the hit; below zero where inlining saves more);
- jit/eager: the ratio the host-overhead goal is stated in.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

import compiler
from suites.host_overhead import PROGRAMS


def per_call_us(
    callables: dict[str, Callable[[], object]], calls: int, batches: int, statistic: str = "min"
) -> dict[str, float]:
    """For each callable, the min (or median) over `batches` of the mean wall time of one call in
    microseconds. The batches of the callables take turns, so a change of machine load during the
    measurement touches all of them alike."""
    for call in callables.values():
        for _ in range(max(calls // 10, 100)):
            call()
    times: dict[str, list[float]] = {name: [] for name in callables}
    for _ in range(batches):
        for name, call in callables.items():
            start = time.perf_counter()
            for _ in range(calls):
                call()
            times[name].append((time.perf_counter() - start) / calls * 1e6)
    pick = min if statistic == "min" else statistics.median
    return {name: pick(samples) for name, samples in times.items()}


def breakdown(
    program: Callable, x: torch.Tensor, calls: int, batches: int, statistic: str = "min", **jit_options: object
) -> dict[str, float]:
    """eager, jit, prologue, computation and wrapper µs per call of `program(x)`."""
    jitted = compiler.jit(program, **jit_options)
    torch.testing.assert_close(jitted(x), program(x))
    entry = jitted.last_entry
    args, kwargs = (x,), {}
    inputs = entry.prologue(args, kwargs)
    callables = {
        "eager": lambda: program(x),
        "jit": lambda: jitted(x),
        "prologue": lambda: entry.prologue(args, kwargs),
        "computation": lambda: entry.computation(*inputs),
    }
    row = per_call_us(callables, calls, batches, statistic)
    # NOTE: each lambda adds one Python call to what it times; eager and jit carry the same one.
    row["wrapper"] = row["jit"] - row["prologue"] - row["computation"]
    return row


def main(argv: list[str] | None = None) -> int:
    """Prints the breakdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--program", choices=sorted(PROGRAMS), action="append", help="default: all")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--calls", type=int, default=2000, help="calls per timed batch")
    parser.add_argument("--batches", type=int, default=100, help="timed batches")
    parser.add_argument("--statistic", choices=("min", "median"), default="min", help="over the batches")
    parser.add_argument("--cuda-graphs", action="store_true", help="jit(..., cuda_graphs=True): replays (CUDA)")
    args = parser.parse_args(argv)
    x = torch.linspace(-1.0, 1.0, 4, device=args.device)
    print(
        f"torch {torch.__version__}, 4-element tensor on {args.device}, "
        f"{args.statistic} of {args.batches} batches of {args.calls} calls"
        + (", CUDA graphs" if args.cuda_graphs else "")
    )
    columns = ("eager", "jit", "prologue", "computation", "wrapper")
    print(f"{'program':8}" + "".join(f"{name + ' µs':>16}" for name in columns) + f"{'jit/eager':>11}")
    for name in args.program or sorted(PROGRAMS):
        row = breakdown(PROGRAMS[name], x, args.calls, args.batches, args.statistic, cuda_graphs=args.cuda_graphs)
        print(f"{name:8}" + "".join(f"{row[c]:16.2f}" for c in columns) + f"{row['jit'] / row['eager']:11.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
