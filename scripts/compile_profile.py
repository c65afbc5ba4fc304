"""Where one compilation of a big program spends its time: a per-step wall-time breakdown.

    PYTHONPATH=. python -m scripts.compile_profile --program gpt2-train|gpt2-forward|adam-gpt2|zoo-train
        [--model small|tiny|ARCHITECTURE] [--tokens 1 64] [--device cpu|cuda] [--fake-nvfuser]
        [--fusion merge_same_shape=True ...] [--repeat 3] [--profile 30]

Programs (the suites' own code): `gpt2-train` is suites/gpt2.py's training step through
`compiler.jit(model)` (bf16 forward with cross entropy, then `loss.backward()` through the
compiler's backward); `gpt2-forward` the model in eval mode without grad; `adam-gpt2`
suites/adam_step.py's `adam_step` over GPT-2 small's 148 parameter tensors (GPT-tiny's with
--model tiny); `zoo-train` suites/hf_zoo.py's training step of the architecture `--model` names
(`--model llama`: the zoo's GPU size on CUDA, its quick size on CPU; `--tokens` ignored). Uses
nvFuser when it can run here, or its CPU test fake with --fake-nvfuser (run from the repository
root), so that fusion and definition building run as they do on a GPU.

A fresh jitted function is called once (the compilation) and once more (a cache hit). Rows, in
the order the steps started, a step's inner steps indented below it: each pass, as it records its
own time (`# Constructed by <pass> (took N ms)`, reported through `compiler.passes.PASS_OBSERVERS`)
and named after the trace it made (computation, forward, backward, prologue); timers around the
pipeline's other steps (tracing, autodiff, the min-cut split, code generation, building nvFuser
definitions, compiling a backward on the first `backward()`); "first run (the rest)": running
the program, nvFuser compiling its kernels included. "host-side compile" is everything but that.
Then the slowest first runs of single fusions (definition + nvFuser compilation + run; on a GPU
each is synchronised) and, with --profile N, cProfile's N costliest functions of the first call.
"of which Python's garbage collector": the collections that ran inside those steps (a full one
scans every object of the process, torch's included). --repeat N compiles N times, each from a
cleared fusion cache (`compiler.clear_fusion_cache()`, as in a new process), and shows each row's
minimum (for a busy machine).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import cProfile
import gc
import io
import pstats
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import torch

import compiler
import compiler.examine
from compiler.core.ir import Trace
from compiler.executors.nvfuser import executor as nvfuser_module
from compiler.passes import PASS_OBSERVERS
from compiler.runtime import pipeline
from compiler.tracing import frontend

PROGRAMS = ("gpt2-train", "gpt2-forward", "adam-gpt2", "zoo-train")


class Timers:
    """Wall time per step, as paths of labels: a step timed inside another is its child."""

    def __init__(self) -> None:
        self.seconds: dict[tuple[str, ...], float] = defaultdict(float)
        self.stack: list[str] = []
        self.listing = ""  # cProfile's, when asked for
        self.first_runs: list[tuple[str, int, int, int, float]] = []  # (fusion, ops, inputs, outputs, seconds)
        self.gc_seconds = 0.0  # Python's garbage collections while a step ran
        self._gc_start = 0.0

    def wrap(self, label: str, fn: Callable) -> Callable:
        """`fn`, each call timed under `label` (below the steps it runs inside)."""

        def timed(*args: Any, **kwargs: Any) -> Any:
            self.stack.append(label)
            path = tuple(self.stack)
            self.seconds.setdefault(path, 0.0)  # NOTE: rows in the order the steps start
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[path] += time.perf_counter() - start
                self.stack.pop()

        return timed

    def wrap_first_runs(self, run: Callable, synchronize: Callable[[], None]) -> Callable:
        """`NvFuserRunner.run`, each fusion's first call with new input layouts (building its
        definition, nvFuser compiling it, running it) timed into `first_runs`."""

        def timed(runner: Any, fusion: Any, args: tuple, key: tuple) -> Any:
            if key in runner.by_key:
                return run(runner, fusion, args, key)
            start = time.perf_counter()
            outputs = run(runner, fusion, args, key)
            synchronize()
            region = fusion.region
            self.first_runs.append(
                (f"#{len(self.first_runs)} {fusion.name}", len(region.bsyms), len(region.inputs),
                 len(region.outputs), time.perf_counter() - start)
            )  # fmt: skip
            return outputs

        return timed

    def observe_gc(self, phase: str, info: dict) -> None:
        """A `gc.callbacks` entry: the time of each collection that starts inside a step."""
        if phase == "start":
            self._gc_start = time.perf_counter()
        elif self.stack:
            self.gc_seconds += time.perf_counter() - self._gc_start

    def observe_pass(self, name: str, trace: Trace, took_ms: float) -> None:
        """A `PASS_OBSERVERS` entry: the pass's own record of its time, under the running step."""
        self.seconds[(*self.stack, f"{trace.name}: {name}")] += took_ms / 1e3


# (owner, attribute, label): the pipeline's steps that are not `@trace_pass` passes.
def _timed_steps() -> list[tuple[Any, str, str]]:
    return [
        (frontend, "trace_call", "tracing"),
        (pipeline, "grad_guard", "grad guard"),
        (pipeline, "joint", "autodiff (joint trace)"),
        (pipeline, "split_backward", "split_backward (min-cut)"),
        (pipeline, "check_writebacks", "check_writebacks"),
        (pipeline, "compile_trace", "codegen"),
        (pipeline, "compile_prologue", "prologue codegen"),
        (pipeline, "_compile_backward", "backward compile"),
        (pipeline._FullBackward, "traces", "backward passes (every cotangent)"),
        (pipeline, "_partial_backward", "backward passes (cotangents present)"),
        (nvfuser_module.NvFuserRunner, "definition", "nvFuser definitions"),
    ]


@contextlib.contextmanager
def timing(timers: Timers, device: torch.device) -> Iterator[None]:
    """Wraps the pipeline's steps (`_timed_steps`) and fusions' first runs with `timers`, and
    observes every pass, while inside."""
    runner = nvfuser_module.NvFuserRunner
    steps = [(runner, "run", timers.wrap_first_runs(runner.run, lambda: _synchronize(device)))]
    steps += [(owner, name, timers.wrap(label, getattr(owner, name))) for owner, name, label in _timed_steps()]
    originals = [getattr(owner, name) for owner, name, _ in steps]
    PASS_OBSERVERS.append(timers.observe_pass)
    gc.callbacks.append(timers.observe_gc)
    try:
        for owner, name, replacement in steps:
            setattr(owner, name, replacement)
        yield
    finally:
        gc.callbacks.remove(timers.observe_gc)
        PASS_OBSERVERS.remove(timers.observe_pass)
        for (owner, name, _), original in zip(steps, originals):
            setattr(owner, name, original)


@contextlib.contextmanager
def fake_nvfuser() -> Iterator[None]:
    """The nvFuser executor on CPU against the torch-evaluated fake of nvfuser_direct."""
    # NOTE: the fake lives with the tests; run from the repository root so `tests` imports.
    from compiler.executors.nvfuser.define.claims import unsupported
    from compiler.executors.nvfuser.diagnose import fake_nvfuser as fake_api

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


def program(
    name: str, model: str, tokens: tuple[int, int], device: torch.device, fusion: dict | None = None
) -> tuple[Any, Callable]:
    """(the jitted function, a call of it: one step of the program); `fusion`: FusionOptions fields."""
    executors = ["nvfuser", "sdpa", "torch"] if nvfuser_module.unavailable_reason() is None else None
    if name == "zoo-train":
        return _zoo_training(model, device)
    if model not in ("small", "tiny"):
        raise SystemExit(f"compile_profile: --model {model!r} with {name}: expected small or tiny")
    if name == "adam-gpt2":
        from suites.adam_step import BETA1, BETA2, EPS, LR, PARAMETER_SETS, STEP, adam_step

        shapes = PARAMETER_SETS["gpt2-small" if model == "small" else "gpt-tiny"]

        def tensors() -> list[torch.Tensor]:
            return [torch.randn(shape, device=device) for shape in shapes]

        params, grads, exp_avgs, exp_avg_sqs = tensors(), tensors(), tensors(), [t.abs() for t in tensors()]
        jitted = compiler.jit(adam_step, executors=executors, fusion=fusion)
        return jitted, lambda: jitted(params, grads, exp_avgs, exp_avg_sqs, STEP, LR, BETA1, BETA2, EPS)

    from suites._models.gpt import GPT, GPTConfig

    torch.manual_seed(0)
    config = GPTConfig.small() if model == "small" else GPTConfig.tiny()
    gpt = GPT(config).to(device=device, dtype=torch.bfloat16)
    batch, length = tokens
    ids = torch.randint(0, config.vocab_size, (batch, length + 1), device=device)
    inputs, targets = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()
    jitted = compiler.jit(gpt, executors=executors, fusion=fusion)
    if name == "gpt2-forward":
        gpt.eval().requires_grad_(False)
        return jitted, lambda: jitted(inputs)

    def train() -> None:
        jitted(inputs, targets)["loss"].backward()

    gpt.train()
    return jitted, train


def _zoo_training(architecture: str, device: torch.device) -> tuple[Any, Callable]:
    """The hf_zoo suite's training step of `architecture` through `compiler.jit` of its model (the
    suite's GPU grid on CUDA, its quick grid elsewhere)."""
    from suites.hf_zoo import ALL, CASES

    if architecture not in ALL:
        raise SystemExit(f"compile_profile: --model {architecture!r} with zoo-train: expected one of {', '.join(ALL)}")
    case = next(c for c in CASES if c.name == "zoo_training")
    grid = case.params if device.type == "cuda" else case.quick_params
    params = {key: values[0] for key, values in grid.items()} | {"model": architecture}
    inputs = case.make_inputs(params, device, 0)
    jitted = compiler.jit(inputs[0])
    return jitted, lambda: case.call(lambda model, *batch: jitted(*batch), inputs)


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def measure(call: Callable, jitted: Any, device: torch.device, profile: int) -> tuple[list[tuple[str, float]], Timers]:
    """(rows of (label, seconds), the timers): the first call of `call`, step by step, and a
    second call for comparison. Nested steps' labels are indented below their parent."""
    timers = Timers()
    profiler = cProfile.Profile() if profile else None
    with timing(timers, device):
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
    rows: list[tuple[str, float]] = []
    for path, seconds in timers.seconds.items():
        rows.append(("  " * (len(path) - 1) + path[-1], seconds))
    # NOTE: these top-level steps run outside the jit miss (at the first run or the first backward).
    later = {"nvFuser definitions", "backward compile"}
    inside = sum(seconds for path, seconds in timers.seconds.items() if len(path) == 1 and path[0] not in later)
    outside = sum(seconds for path, seconds in timers.seconds.items() if len(path) == 1 and path[0] in later)
    rows.append(("other compile steps", max(compile_seconds - inside, 0.0)))
    rows.append(("first run (the rest)", max(first - compile_seconds - outside, 0.0)))
    rows += [
        ("= compile (the jit miss)", compile_seconds),
        ("= host-side compile (all but the run)", compile_seconds + outside),
        ("= of which Python's garbage collector", timers.gc_seconds),
        ("= first call, total", first),
        ("= second call (a cache hit)", again),
    ]
    if profiler:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(profile)
        timers.listing = out.getvalue()
    return rows, timers


def report(rows: list[tuple[str, float]]) -> str:
    """The rows as a table: steps in the order they first ran (children indented), then totals."""
    first = dict(rows)["= first call, total"] or 1.0
    lines = [f"{'step':<48} {'ms':>10} {'% of first call':>16}"]
    for label, seconds in rows:
        if label.startswith("= ") and not lines[-1].startswith(("-", "=")):
            lines.append("-" * 76)
        lines.append(f"{label:<48} {seconds * 1e3:>10.1f} {100 * seconds / first:>15.1f}%")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Parses the arguments, compiles the program once and prints the breakdown."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--program", choices=PROGRAMS, required=True)
    parser.add_argument("--model", default="small", help="GPT-2 small or tiny; zoo-train: an architecture")
    parser.add_argument("--tokens", type=int, nargs=2, default=(1, 64), metavar=("BATCH", "LENGTH"))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--fake-nvfuser", action="store_true", help="nvFuser executor on CPU (the test fake)")
    parser.add_argument(
        "--fusion", nargs="*", default=[], metavar="KEY=VALUE", help="FusionOptions, e.g. merge_same_shape=True"
    )
    parser.add_argument("--repeat", type=int, default=1, help="compile afresh N times; each row's minimum")
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="also list N functions (cProfile)")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    with fake_nvfuser() if args.fake_nvfuser else contextlib.nullcontext():
        fusion = {key: ast.literal_eval(value) for key, value in (item.split("=", 1) for item in args.fusion)}
        runs = []
        for _ in range(max(args.repeat, 1)):
            compiler.clear_fusion_cache()  # NOTE: each compilation defines its fusions afresh, as a new process would
            jitted, call = program(args.program, args.model, tuple(args.tokens), device, fusion)
            runs.append(measure(call, jitted, device, args.profile))
    rows = [(label, min(dict(r)[label] for r, _ in runs)) for label, _ in runs[0][0]]
    last = runs[-1][1]
    nvfuser = "fake" if args.fake_nvfuser else "real" if nvfuser_module.unavailable_reason() is None else "off"
    counts = f"{len(jitted.last_entry.traces[0].bsyms)} traced ops"
    if nvfuser != "off":
        fused = compiler.examine.stats(jitted)
        counts += f", {fused.definitions} nvFuser definitions ({fused.reused} regions reusing one)"
    print(f"{args.program} (model {args.model}, tokens {tuple(args.tokens)}, {device}, nvFuser {nvfuser}): {counts}")
    print(report(rows))
    if last.first_runs:
        slowest = sorted(last.first_runs, key=lambda run: -run[-1])[:8]
        print(f"\nslowest first runs of {len(last.first_runs)} fusions (definition, nvFuser compilation, run):")
        for name, ops, inputs, outputs, seconds in slowest:
            print(f"  {name:<20} {ops:>5} ops {inputs:>4} inputs {outputs:>4} outputs {seconds * 1e3:>10.1f} ms")
    if last.listing:
        print(last.listing)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
