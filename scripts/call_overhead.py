"""Per-call host overhead of a jitted function, split into prologue, computation and wrapper.

    OMP_NUM_THREADS=1 PYTHONPATH=. python scripts/call_overhead.py [--program 1-op] [--device cpu] [--graphs off]

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

Then (unless --program is given) the same for two training-loop idioms, whole calls only:
- autograd: `gelu(x * w)` with w requiring grad, then `torch.autograd.grad` of it (forward and
  backward through the compiled autograd function); `autograd fwd` is the forward alone, and
  `wrapper` there is what running the forward under autograd adds to the compiled forward;
- adam-32: an Adam-like in-place update of 32 parameters with their gradients and two states
  (number arguments symbolic, as an optimizer's step count and learning rate are);
- adam-32 sched: the same update with a new step count and learning rate every call, as a
  training loop under a learning-rate schedule calls it (under CUDA graphs, read from device
  scalars: `examine.cuda_graphs` says so).

`--graphs auto` (the default: `jit`'s own, automatic CUDA graphs on a CUDA device), `on`
(`cuda_graphs=True`) or `off`.
"""

from __future__ import annotations

import argparse
import itertools
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


def _gelu_scale(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x * w)


def _adam_like(params: list, grads: list, ms: list, vs: list, lr: float, step: int) -> None:
    for p, g, m, v in zip(params, grads, ms, vs):
        m.mul_(0.9).add_(g, alpha=0.1)
        v.mul_(0.999).addcmul_(g, g, value=0.001)
        p.sub_(lr * (m / (1 - 0.9**step)) / ((v / (1 - 0.999**step)).sqrt() + 1e-8))


def idioms(
    device: str, calls: int, batches: int, statistic: str, **jit_options: object
) -> tuple[dict[str, dict[str, float]], str]:
    """eager and jit µs per call (and for the autograd forward, prologue / computation / wrapper) of
    the training-loop idioms listed in the module docstring, and the scheduled update's CUDA graphs
    (`examine.cuda_graphs`)."""
    x, w = torch.linspace(-1.0, 1.0, 4, device=device), torch.linspace(0.5, 1.5, 4, device=device)
    w.requires_grad_(True)
    cotangent = torch.ones(4, device=device)
    forward = compiler.jit(_gelu_scale, **jit_options)
    torch.testing.assert_close(
        torch.autograd.grad(forward(x, w), w, cotangent), torch.autograd.grad(_gelu_scale(x, w), w, cotangent)
    )
    entry = forward.last_entry
    inputs = entry.prologue((x, w), {})
    rows = {
        "autograd": per_call_us(
            {
                "eager": lambda: torch.autograd.grad(_gelu_scale(x, w), w, cotangent),
                "jit": lambda: torch.autograd.grad(forward(x, w), w, cotangent),
            },
            calls,
            batches,
            statistic,
        ),
        "autograd fwd": per_call_us(
            {
                "eager": lambda: _gelu_scale(x, w),
                "jit": lambda: forward(x, w),
                "prologue": lambda: entry.prologue((x, w), {}),
                "computation": lambda: entry.computation.forward(*inputs),
            },
            calls,
            batches,
            statistic,
        ),
    }
    rows["autograd fwd"]["wrapper"] = (
        rows["autograd fwd"]["jit"] - rows["autograd fwd"]["prologue"] - rows["autograd fwd"]["computation"]
    )
    state = [[torch.rand(4, device=device) for _ in range(32)] for _ in range(4)]
    step = compiler.jit(_adam_like, numbers="symbolic", **jit_options)
    step(*state, 1e-3, 3)
    rows["adam-32"] = per_call_us(
        {"eager": lambda: _adam_like(*state, 1e-3, 3), "jit": lambda: step(*state, 1e-3, 3)},
        max(calls // 20, 10),
        batches,
        statistic,
    )
    scheduled = compiler.jit(_adam_like, **jit_options)
    steps = itertools.count(1)

    def under_schedule(update: Callable[..., None]) -> None:
        number = next(steps)
        update(*state, 1e-3 * 0.999**number, number)

    rows["adam-32 sched"] = per_call_us(
        {"eager": lambda: under_schedule(_adam_like), "jit": lambda: under_schedule(scheduled)},
        max(calls // 20, 10),
        batches,
        statistic,
    )
    graphs = "off" if jit_options.get("cuda_graphs") is False else str(compiler.examine.cuda_graphs(scheduled))
    return rows, graphs


_GRAPHS = {"auto": None, "on": True, "off": False}


def main(argv: list[str] | None = None) -> int:
    """Prints the breakdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--program", choices=sorted(PROGRAMS), action="append", help="default: all")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--calls", type=int, default=2000, help="calls per timed batch")
    parser.add_argument("--batches", type=int, default=100, help="timed batches")
    parser.add_argument("--statistic", choices=("min", "median"), default="min", help="over the batches")
    parser.add_argument(
        "--graphs", choices=sorted(_GRAPHS), default="auto", help="jit's cuda_graphs: auto (None), on (True), off"
    )
    args = parser.parse_args(argv)
    graphs = _GRAPHS[args.graphs]
    x = torch.linspace(-1.0, 1.0, 4, device=args.device)
    print(
        f"torch {torch.__version__}, 4-element tensor on {args.device}, "
        f"{args.statistic} of {args.batches} batches of {args.calls} calls" + f", CUDA graphs {args.graphs}"
    )
    columns = ("eager", "jit", "prologue", "computation", "wrapper")
    print(f"{'program':8}" + "".join(f"{name + ' µs':>16}" for name in columns) + f"{'jit/eager':>11}")
    for name in args.program or sorted(PROGRAMS):
        row = breakdown(PROGRAMS[name], x, args.calls, args.batches, args.statistic, cuda_graphs=graphs)
        print(f"{name:8}" + "".join(f"{row[c]:16.2f}" for c in columns) + f"{row['jit'] / row['eager']:11.2f}")
    if args.program:
        return 0
    rows, scheduled_graphs = idioms(args.device, args.calls, args.batches, args.statistic, cuda_graphs=graphs)
    for name, row in rows.items():
        cells = "".join(f"{row[c]:16.2f}" if c in row else f"{'':16}" for c in columns)
        print(f"{name:13}" + cells[5:] + f"{row['jit'] / row['eager']:11.2f}")
    print(f"adam-32 sched, CUDA graphs:\n{scheduled_graphs}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
