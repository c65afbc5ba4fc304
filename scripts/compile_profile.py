"""Where one compilation of a big program spends its time: a per-phase wall-time breakdown.

    PYTHONPATH=. python -m scripts.compile_profile --program gpt2-train|gpt2-forward|adam-gpt2
        [--model small|tiny] [--tokens 1 64] [--device cpu|cuda] [--fake-nvfuser] [--profile 30]

Programs (the suites' own code): `gpt2-train` is suites/gpt2.py's training step through
`compiler.jit(model)` (forward with cross entropy, then `loss.backward()` through the compiler's
backward); `gpt2-forward` the model in eval mode, no grad; `adam-gpt2` suites/adam_step.py's
`adam_step` over the 148 parameter tensors of GPT-2 small (or GPT-tiny's with --model tiny).

One jitted function is called once (its compilation) and again (a cache hit, for comparison).
The rows are the compilation's phases: tracing, each pass as the trace it made records it
(`# Constructed by <pass> (took N ms)`), and timers wrapped around the pipeline's other steps
(autodiff's joint trace, code generation of each trace, the prologue, building nvFuser fusion
definitions on a fusion's first call, compiling the backward for the cotangents a `backward()`
provides). "first run" is the rest of the first call: running the computation, nvFuser's own
compilation of each definition included. `--fake-nvfuser` runs the nvFuser executor on CPU
against tests/compiler/fake_nvfuser.py, so the fusion pass and definition building run as on a
GPU; `--profile N` adds the N costliest functions of the first call (cProfile, cumulative).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import pstats
import re
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import torch

import compiler
from compiler.executors import nvfuser as nvfuser_module
from compiler.runtime import pipeline
from compiler.tracing import frontend

PROGRAMS = ("gpt2-train", "gpt2-forward", "adam-gpt2")
_TOOK = re.compile(r"^(\S+) \(took ([0-9.]+) ms\)$")


class Timers:
    """Wall time per label, accumulated by functions wrapped with `wrap`."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.depth = 0

    def wrap(self, label: str, fn: Callable) -> Callable:
        """`fn`, its outermost calls timed under `label` (a nested timed call counts only once)."""

        def timed(*args: Any, **kwargs: Any) -> Any:
            if self.depth:
                return fn(*args, **kwargs)
            self.depth += 1
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[label] += time.perf_counter() - start
                self.depth -= 1

        return timed


# (object, attribute, label): the pipeline steps that no pass provenance times.
def _timed_steps() -> list[tuple[Any, str, str]]:
    return [
        (frontend, "trace", "tracing"),
        (pipeline, "grad_guard", "grad guard"),
        (pipeline, "joint", "autodiff (joint)"),
        (pipeline, "check_writebacks", "check_writebacks"),
        (pipeline, "compile_trace", "codegen"),
        (pipeline, "compile_prologue", "prologue codegen"),
        (pipeline, "_partial_backward", "backward for present cotangents"),
        (nvfuser_module.NvFuserRunner, "definition", "nvFuser definitions"),
    ]


@contextlib.contextmanager
def timing(timers: Timers) -> Iterator[None]:
    """Wraps the pipeline's steps (`_timed_steps`) with `timers` while inside."""
    originals = [(owner, name, getattr(owner, name)) for owner, name, _ in _timed_steps()]
    try:
        for (owner, name, label), (_, _, original) in zip(_timed_steps(), originals):
            setattr(owner, name, timers.wrap(label, original))
        yield
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)


@contextlib.contextmanager
def fake_nvfuser() -> Iterator[None]:
    """The nvFuser executor on CPU against the torch-evaluated fake of nvfuser_direct."""
    # NOTE: the fake lives with the tests; run from the repository root so `tests` imports.
    from compiler.executors.nvfuser_translate import unsupported
    from tests.compiler import fake_nvfuser as fake_api

    fake = fake_api.module()
    executor = nvfuser_module.NvFuserExecutor
    saved = (nvfuser_module.unavailable_reason, nvfuser_module.nvfuser_direct, executor.claim)
    nvfuser_module.unavailable_reason = lambda: None
    nvfuser_module.nvfuser_direct = lambda: fake
    executor.claim = lambda self, bsym: unsupported(bsym, matmul=self.options.matmul)
    try:
        yield
    finally:
        nvfuser_module.unavailable_reason, nvfuser_module.nvfuser_direct, executor.claim = saved


def program(name: str, model: str, tokens: tuple[int, int], device: torch.device) -> tuple[Any, Callable]:
    """(the jitted function, a call of it: one step of the program)."""
    executors = ["nvfuser", "sdpa", "torch"] if nvfuser_module.unavailable_reason() is None else None
    if name == "adam-gpt2":
        from suites.adam_step import BETA1, BETA2, EPS, LR, PARAMETER_SETS, STEP, adam_step

        shapes = PARAMETER_SETS["gpt2-small" if model == "small" else "gpt-tiny"]

        def tensors() -> list[torch.Tensor]:
            return [torch.randn(shape, device=device) for shape in shapes]

        params, grads, exp_avgs, exp_avg_sqs = tensors(), tensors(), tensors(), [t.abs() for t in tensors()]
        jitted = compiler.jit(adam_step, executors=executors)
        return jitted, lambda: jitted(params, grads, exp_avgs, exp_avg_sqs, STEP, LR, BETA1, BETA2, EPS)

    from suites._models.gpt import GPT, GPTConfig

    torch.manual_seed(0)
    config = GPTConfig.small() if model == "small" else GPTConfig.tiny()
    gpt = GPT(config).to(device=device, dtype=torch.bfloat16)
    batch, length = tokens
    ids = torch.randint(0, config.vocab_size, (batch, length + 1), device=device)
    inputs, targets = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()
    jitted = compiler.jit(gpt, executors=executors)
    if name == "gpt2-forward":
        gpt.eval().requires_grad_(False)
        return jitted, lambda: jitted(inputs)

    def train() -> None:
        jitted(inputs, targets)["loss"].backward()

    gpt.train()
    return jitted, train


def pass_rows(jitted: Any) -> dict[str, float]:
    """Seconds per pass, from the provenance of the entry's forward and backward traces."""
    entry = jitted.last_entry
    rows: dict[str, float] = defaultdict(float)
    seen: set[int] = set()
    for prefix, traces in (("", entry.traces), ("backward ", entry.backward_traces)):
        for trace in traces:
            match = _TOOK.match(trace.provenance)
            if match is None or id(trace) in seen:
                continue
            seen.add(id(trace))
            name = match.group(1)
            # NOTE: split_backward makes both the forward and the backward; it ran once.
            label = name if name == "split_backward" else prefix + name
            if name == "split_backward" and label in rows:
                continue
            rows[label] += float(match.group(2)) / 1e3
    return rows


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def measure(call: Callable, jitted: Any, device: torch.device, profile: int) -> tuple[dict[str, float], str]:
    """(seconds per row, the cProfile listing or ''), for the first call of `call` and a second one."""
    timers = Timers()
    profiler = cProfile.Profile() if profile else None
    with timing(timers):
        start = time.perf_counter()
        if profiler:
            profiler.enable()
        call()
        _synchronize(device)
        if profiler:
            profiler.disable()
        first = time.perf_counter() - start
    start = time.perf_counter()
    call()
    _synchronize(device)
    again = time.perf_counter() - start
    compile_seconds = jitted.last_entry.compile_seconds
    rows = dict(timers.seconds)
    rows.update(pass_rows(jitted))
    inside_compile = ("tracing", "grad guard", "autodiff (joint)", "check_writebacks", "codegen", "prologue codegen")
    accounted = sum(v for k, v in rows.items() if k in inside_compile or k in pass_rows(jitted))
    rows["other compile steps"] = max(compile_seconds - accounted, 0.0)
    rows["compile (jit miss, total)"] = compile_seconds
    outside_compile = ("nvFuser definitions", "backward for present cotangents")
    rows["first run (the rest)"] = max(first - compile_seconds - sum(rows.get(k, 0.0) for k in outside_compile), 0.0)
    rows["first call, total"] = first
    rows["second call (cache hit)"] = again
    listing = ""
    if profiler:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(profile)
        listing = out.getvalue()
    return rows, listing


def report(rows: dict[str, float]) -> str:
    """The rows as a table: phases in the order they ran, then the totals."""
    totals = [k for k in rows if k.startswith(("compile (", "first call", "second call"))]
    first = rows["first call, total"] or 1.0
    lines = [f"{'phase':<40} {'ms':>10} {'% of first call':>16}"]
    for label, seconds in rows.items():
        if label in totals:
            continue
        lines.append(f"{label:<40} {seconds * 1e3:>10.1f} {100 * seconds / first:>15.1f}%")
    lines.append("-" * 68)
    lines += [f"{label:<40} {rows[label] * 1e3:>10.1f}" for label in totals]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Parses the arguments, compiles the program once and prints the breakdown."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--program", choices=PROGRAMS, required=True)
    parser.add_argument("--model", choices=("small", "tiny"), default="small", help="GPT-2 small or GPT-tiny")
    parser.add_argument("--tokens", type=int, nargs=2, default=(1, 64), metavar=("BATCH", "LENGTH"))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--fake-nvfuser", action="store_true", help="nvFuser executor on CPU (the test fake)")
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="also list N functions (cProfile)")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    with fake_nvfuser() if args.fake_nvfuser else contextlib.nullcontext():
        jitted, call = program(args.program, args.model, tuple(args.tokens), device)
        rows, listing = measure(call, jitted, device, args.profile)
    fusions = sum(1 for b in jitted.last_entry.traces[-1].bsyms if getattr(b.sym, "executor", None) == "nvfuser")
    backward = jitted.last_entry.backward_traces
    if backward:
        fusions_bw = sum(1 for b in backward[-1].bsyms if getattr(b.sym, "executor", None) == "nvfuser")
        fusions_text = f"{fusions} forward + {fusions_bw} backward fusions"
    else:
        fusions_text = f"{fusions} fusions"
    print(
        f"{args.program} (model {args.model}, tokens {tuple(args.tokens)}, device {device}, "
        f"nvFuser {'fake' if args.fake_nvfuser else 'real' if nvfuser_module.unavailable_reason() is None else 'off'}"
        f"): {len(jitted.last_entry.traces[0].bsyms)} traced ops, {fusions_text}"
    )
    print(report(rows))
    if listing:
        print(listing)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
