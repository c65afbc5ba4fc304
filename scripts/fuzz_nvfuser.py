"""Differential fuzzing: random programs run jitted (nvFuser on a GPU) against eager PyTorch.

    python -m scripts.fuzz_nvfuser --seed 0 --count 2000            # GPU: executors nvfuser, torch
    python -m scripts.fuzz_nvfuser --seed 0 --count 50 --device cpu  # CPU: the torch executor

A program (the hypothesis strategy `programs`) takes 1-3 tensors (float32 or bfloat16, some
non-contiguous: transposed, strided or expanded) and applies 2-10 steps: elementwise math, broadcasting
binary ops against other values, numbers and keepdim reductions, reductions, views (transpose,
slice), and in-place updates of its arguments (whole or through a slice). Each program is printed
as Python source, so a failure is a runnable repro. A mismatch (outputs or updated arguments not
within tolerance of eager, or an error eager does not raise) is shrunk by hypothesis to a minimal
program; the summary lists each minimized failure. A program nvFuser refuses to compile is not a
mismatch when the default fallback to torch (what a user gets, with a warning) gives eager's
results; the summary counts those by nvFuser's error. Nor is a bfloat16 program whose jitted
results match the float64 run of the same program (rounded to bfloat16) where eager's do not: a
fusion keeps bf16 intermediates in fp32 (as torch.compile and thunder do), and a cancellation can
magnify eager's rounding of an intermediate (`(a + 1.5) * (a + 1.5 - 3)` near a = 1.5); the
summary counts those too. Exit status: 1 if any mismatch was found.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

import compiler
from tests.support.inplace_util import same_layout

UNARY = ("torch.neg({})", "torch.abs({})", "torch.sin({})", "torch.tanh({})", "torch.sigmoid({})",
         "torch.relu({})", "torch.exp(torch.tanh({}))", "({} * 0.5 + 1.0)")  # fmt: skip
BINARY = ("torch.add({}, {})", "torch.sub({}, {})", "torch.mul({}, {})", "torch.maximum({}, {})",
          "torch.minimum({}, {})", "torch.where({0} > {1}, {0}, {1})")  # fmt: skip
REDUCTIONS = ("sum", "mean", "amax")
TOLERANCES = {torch.float32: (1e-4, 1e-5), torch.bfloat16: (2e-2, 2e-2)}
ROUNDING = "bf16 intermediates kept in fp32: the jitted results are float64's, eager's rounding differs"


@dataclass
class Program:
    """A random program: its inputs' descriptions and the lines of its body."""

    inputs: list[tuple[tuple[int, ...], torch.dtype, str]]  # shape, dtype, layout
    lines: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)

    def source(self) -> str:
        names = ", ".join(f"a{i}" for i in range(len(self.inputs)))
        body = "".join(f"    {line}\n" for line in self.lines)
        return f"def program({names}):\n{body}    return ({', '.join(self.outputs)},)\n"

    def function(self):
        namespace: dict = {"torch": torch}
        exec(compile(self.source(), "<fuzzed program>", "exec"), namespace)
        return namespace["program"]

    def make_inputs(self, device: str, generator_seed: int) -> list[torch.Tensor]:
        generator = torch.Generator().manual_seed(generator_seed)
        tensors = []
        for shape, dtype, layout in self.inputs:
            # NOTE: the layout is made on the device: `.to` and `clone` make a tensor with gaps dense
            if layout == "transposed" and len(shape) >= 2:
                t = torch.randn(*shape[:-2], shape[-1], shape[-2], generator=generator).to(device, dtype).mT
            elif layout == "strided":
                t = torch.randn(*shape[:-1], shape[-1] * 2, generator=generator).to(device, dtype)[..., ::2]
            elif layout == "expanded" and len(shape) >= 1:  # a stride-0 leading dim (eager refuses writes into it)
                t = torch.randn(1, *shape[1:], generator=generator).to(device, dtype).expand(shape)
            else:
                t = torch.randn(*shape, generator=generator).to(device, dtype)
            tensors.append(t)
        return tensors

    def __repr__(self) -> str:
        described = ", ".join(f"{str(d).removeprefix('torch.')}{list(s)} {layout}" for s, d, layout in self.inputs)
        return f"# inputs: {described}\n{self.source()}"


@st.composite
def programs(draw: st.DrawFn) -> Program:
    """Random programs over broadcast-compatible values (see the module)."""
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank)))
    dtype = draw(st.sampled_from([torch.float32, torch.bfloat16]))
    count = draw(st.integers(1, 3))
    inputs = []
    for _ in range(count):
        layout = draw(st.sampled_from(["contiguous", "transposed", "strided", "expanded"]))
        inputs.append((shape, dtype, layout))
    program = Program(inputs)
    values = {f"a{i}": shape for i in range(count)}  # name -> shape
    for step in range(draw(st.integers(2, 10))):
        name = f"v{step}"
        kind = draw(st.sampled_from(["unary", "binary", "number", "reduce", "view", "inplace", "inplace_slice"]))
        source = draw(st.sampled_from(sorted(values)))
        src_shape = values[source]
        if kind == "unary":
            program.lines.append(f"{name} = {draw(st.sampled_from(UNARY)).format(source)}")
            values[name] = src_shape
        elif kind == "binary":
            other = draw(st.sampled_from(sorted(values)))
            try:
                out = tuple(torch.broadcast_shapes(src_shape, values[other]))
            except RuntimeError:
                continue
            program.lines.append(f"{name} = {draw(st.sampled_from(BINARY)).format(source, other)}")
            values[name] = out
        elif kind == "number":
            number = draw(st.sampled_from([0.5, -2.0, 3]))
            with_number = BINARY[:3] + BINARY[5:]  # maximum/minimum take tensors only
            program.lines.append(f"{name} = {draw(st.sampled_from(with_number)).format(source, number)}")
            values[name] = src_shape
        elif kind == "reduce" and src_shape:
            dim = draw(st.integers(0, len(src_shape) - 1))
            keepdim = draw(st.booleans())
            program.lines.append(
                f"{name} = torch.{draw(st.sampled_from(REDUCTIONS))}({source}, {dim}, keepdim={keepdim})"
            )
            values[name] = src_shape[:dim] + ((1,) if keepdim else ()) + src_shape[dim + 1 :]
            if not values[name]:
                values[name] = ()
        elif kind == "view" and len(src_shape) >= 2:
            program.lines.append(f"{name} = {source}.transpose(0, -1)")
            values[name] = (src_shape[-1], *src_shape[1:-1], src_shape[0])
        elif kind == "view" and src_shape and src_shape[-1] > 1:
            program.lines.append(f"{name} = {source}[..., 1:]")
            values[name] = (*src_shape[:-1], src_shape[-1] - 1)
        elif kind in ("inplace", "inplace_slice"):
            target = draw(st.sampled_from([f"a{i}" for i in range(count)]))
            value = draw(st.sampled_from(sorted(v for v in values if v.startswith("v")) or ["1.5"]))
            view = target if kind == "inplace" or shape[0] < 2 else f"{target}[1:]"
            target_shape = shape if view == target else (shape[0] - 1, *shape[1:])
            value_shape = values.get(value, ())
            try:
                if tuple(torch.broadcast_shapes(target_shape, value_shape)) != tuple(target_shape):
                    continue
            except RuntimeError:
                continue
            op = draw(st.sampled_from(["add_", "mul_", "copy_"]))
            program.lines.append(f"{view}.{op}({value})")
    produced = [v for v in values if v.startswith("v")] or ["a0 * 1"]
    program.outputs = produced[-2:]
    return program


class Mismatch(AssertionError):
    """The jitted program disagreed with eager."""


def _disagreement(got: list[torch.Tensor], want: list[torch.Tensor], what: str) -> str | None:
    """The first of `got` not within tolerance of `want` (`what` i: the error), or None."""
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        rtol, atol = TOLERANCES[w.dtype]
        try:
            torch.testing.assert_close(g, w, rtol=rtol, atol=atol, equal_nan=True)
        except AssertionError as error:
            return f"{what} {i}: {error}"
    return None


def _matches_float64(fn: Any, inputs: list[torch.Tensor], actual: Any, jit_args: list[torch.Tensor]) -> bool:
    """True when the jitted results equal the float64 run of `fn`, rounded to their dtypes."""
    exact_args = [t.clone().double() for t in inputs]
    exact = fn(*exact_args)
    for got, want in [(actual, exact), (jit_args, exact_args)]:
        if _disagreement(list(got), [w.to(g.dtype) for g, w in zip(got, want, strict=True)], "") is not None:
            return False
    return True


# The compiler's error for an in-place op whose operand overlaps its target other than element for
# element (`a.add_(a[..., 1:])`): eager raises it only where it detects the overlap (not through a
# step slice), and its result otherwise depends on the order it visits elements.
OVERLAP = "refer to a single memory location"


def check_program(program: Program, device: str, executors: list[str]) -> str | None:
    """Runs `program` eagerly and jitted on the same inputs; raises Mismatch on a disagreement.

    Returns the error when nvFuser refused the program and the default fallback to torch (what a
    user gets, with a warning) gave eager's results, ROUNDING when a bf16 program's jitted results
    are float64's where eager's are not; None otherwise."""
    fn = program.function()
    inputs = program.make_inputs(device, 0)
    eager_args, jit_args = [same_layout(t) for t in inputs], [same_layout(t) for t in inputs]
    try:
        expected = fn(*eager_args)
    except RuntimeError:
        return None  # eager rejects it (an overlapping write): nothing to compare
    refused = None
    try:
        actual = compiler.jit(fn, executors=executors, fallback=False)(*jit_args)
    except Exception as error:
        refused = f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"
        jit_args = [same_layout(t) for t in inputs]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                actual = compiler.jit(fn, executors=executors)(*jit_args)
        except Exception as fallback_error:
            if OVERLAP in str(fallback_error):
                return None  # a write through an overlapping read: eager's result depends on element order
            raise Mismatch(f"{type(fallback_error).__name__}: {fallback_error}") from fallback_error
    for what, got, want in [("output", actual, expected), ("argument", jit_args, eager_args)]:
        error = _disagreement(list(got), list(want), what)
        if error is not None:
            if any(t.dtype == torch.bfloat16 for t in inputs) and _matches_float64(fn, inputs, actual, jit_args):
                return ROUNDING
            after = f" (after nvFuser refused: {refused})" if refused else ""
            raise Mismatch(f"{error}{after}")
    return refused


@dataclass
class Summary:
    """What a fuzzing run did."""

    programs_run: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)  # (minimized program, error)
    refused: dict[str, int] = field(default_factory=dict)  # nvFuser's error -> programs (fell back, right)
    rounding: int = 0  # bf16 programs whose jitted results are float64's where eager's are not
    seconds: float = 0.0

    def __str__(self) -> str:
        lines = [f"programs run: {self.programs_run}", f"mismatches: {len(self.failures)}",
                 f"refused by nvFuser, right through the fallback to torch: {sum(self.refused.values())}",
                 f"bf16 programs where the jitted results are float64's and eager's rounding differs: {self.rounding}",
                 f"seconds: {self.seconds:.1f}"]  # fmt: skip
        lines += [f"  {count} x {error[:200]}" for error, count in sorted(self.refused.items())]
        for i, (source, error) in enumerate(self.failures):
            lines += [f"--- minimized failure {i}: {error.splitlines()[0][:300]}", source]
        return "\n".join(lines)


def fuzz(seed_value: int, count: int, device: str, executors: list[str]) -> Summary:
    """Runs `count` random programs from `seed_value`; each mismatch is shrunk and recorded, and
    fuzzing goes on (with the next seed) until `count` programs ran."""
    summary = Summary()
    started = time.perf_counter()
    current_seed = seed_value
    while summary.programs_run < count:
        last_failure: list = []

        @seed(current_seed)
        @settings(
            max_examples=count - summary.programs_run,
            database=None,
            deadline=None,
            derandomize=False,
            report_multiple_bugs=False,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.generate, Phase.shrink],
        )
        @given(programs())
        def run(program: Program) -> None:
            summary.programs_run += 1
            if summary.programs_run % 100 == 0:
                elapsed = time.perf_counter() - started
                print(f"{summary.programs_run}/{count} programs, {len(summary.failures)} mismatches, {elapsed:.0f} s",
                      flush=True)  # fmt: skip
            try:
                refused = check_program(program, device, executors)
                if refused == ROUNDING:
                    summary.rounding += 1
                elif refused is not None:
                    summary.refused[refused] = summary.refused.get(refused, 0) + 1
            except Mismatch as error:
                last_failure[:] = [repr(program), str(error)]  # noqa: B023 (read right after this round)
                raise

        try:
            run()
            break
        except Mismatch:
            summary.failures.append((last_failure[0], last_failure[1]))
            print(f"mismatch (minimized): {last_failure[1].splitlines()[0][:300]}\n{last_failure[0]}", flush=True)
            current_seed += 1
    summary.seconds = time.perf_counter() - started
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="hypothesis seed (default 0)")
    parser.add_argument("--count", type=int, default=200, help="programs to run (default 200)")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--executors", default=None, help="comma-separated; default nvfuser,torch on cuda, torch on cpu"
    )
    args = parser.parse_args(argv)
    executors = args.executors.split(",") if args.executors else (
        ["nvfuser", "torch"] if args.device == "cuda" else ["torch"]
    )  # fmt: skip
    summary = fuzz(args.seed, args.count, args.device, executors)
    print(summary)
    return 1 if summary.failures else 0


if __name__ == "__main__":
    sys.exit(main())
