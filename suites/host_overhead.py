"""Host overhead: what a jitted call adds over eager PyTorch on a tiny tensor.

As a suite (`fusebench run --suite host_overhead`): the 1-op and 20-op programs on a 4-element
tensor, timed on the wall clock in samples of 20 calls, for every variant; compare a variant's
median with eager's. On CUDA the tensor lives on the GPU and the time is the host's launch cost.
Bytes: the 4 float32 elements read once and written once (32 bytes; bandwidth means nothing here).

Standalone (`python -m suites.host_overhead`): measures the median per-call time of eager and
jitted programs on a CPU tensor (after warm-up, each the median of several batches of many calls)
and prints the difference. Per-call overhead is a benchmark, never a timed unit test.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

import compiler
from fusebench.cases import Case, Params
from fusebench.integrations.asv_adapter import asv_benchmarks


def one_op(x: torch.Tensor) -> torch.Tensor:
    """The 1-op program."""
    return x + 1


def twenty_ops(x: torch.Tensor) -> torch.Tensor:
    """The 20-op program: ten multiply-adds."""
    for _ in range(10):
        x = x * 1.0001 + 0.5
    return x


PROGRAMS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {"1-op": one_op, "20-op": twenty_ops}


def per_call_us(fn: Callable, x: torch.Tensor, calls: int, batches: int) -> float:
    """Median over `batches` of the mean wall time per call, in microseconds."""
    for _ in range(max(calls // 10, 100)):
        fn(x)
    times = []
    for _ in range(batches):
        start = time.perf_counter()
        for _ in range(calls):
            fn(x)
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times)


def measure(calls: int = 20000, batches: int = 7) -> list[dict]:
    """One row per program: eager µs, jitted µs, added µs."""
    x = torch.randn(4)
    rows = []
    for name, fn in PROGRAMS.items():
        jitted = compiler.jit(fn)
        torch.testing.assert_close(jitted(x), fn(x))
        eager_us = per_call_us(fn, x, calls, batches)
        jit_us = per_call_us(jitted, x, calls, batches)
        rows.append({"program": name, "eager_us": eager_us, "jit_us": jit_us, "added_us": jit_us - eager_us})
    return rows


def main(argv: list[str] | None = None) -> int:
    """Prints the host-overhead table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000, help="calls per timed batch")
    parser.add_argument("--batches", type=int, default=7, help="timed batches (the median is reported)")
    args = parser.parse_args(argv)
    print(f"torch {torch.__version__}, tiny CPU tensor of 4 elements, median of {args.batches} x {args.calls} calls")
    print(f"{'program':8} {'eager µs':>10} {'jit µs':>10} {'added µs':>10}")
    for row in measure(args.calls, args.batches):
        print(f"{row['program']:8} {row['eager_us']:10.2f} {row['jit_us']:10.2f} {row['added_us']:10.2f}")
    return 0


def _tiny_inputs(params: Params, device: torch.device, seed: int) -> tuple:
    return (torch.linspace(-1.0, 1.0, params["numel"], device=device),)


def _tiny_bytes(params: Params) -> int:
    return 2 * params["numel"] * 4


def _tiny_case(name: str, program: Callable[[torch.Tensor], torch.Tensor], label: str) -> Case:
    return Case(
        name=name,
        fn=program,
        make_inputs=_tiny_inputs,
        bytes_moved=_tiny_bytes,
        params={"numel": [4]},
        timer="wall",
        calls_per_sample=20,
        headline_variants=("torch.compile(reduce-overhead)", "fusebench-cudagraphs"),
        description=f"the {label} program on a 4-element tensor: per-call host overhead",
    )


CASES = [_tiny_case("one_op", one_op, "1-op"), _tiny_case("twenty_ops", twenty_ops, "20-op")]

# ASV sees each case as benchmarks '<suite>.<case>.<metric>' (fusebench/integrations/asv_adapter.py).
globals().update(asv_benchmarks(__name__, CASES))


if __name__ == "__main__":
    raise SystemExit(main())
