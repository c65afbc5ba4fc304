"""Which nvFuser fusions of a model's call compute something else than their own prims run by torch:

    python -m scripts.wrong_fusions qwen3               # a zoo architecture's training call
    python -m scripts.wrong_fusions qwen3 --inference   # its forward alone
    python -m scripts.wrong_fusions qwen3 --fake        # through the CPU fake of nvFuser

A model that disagrees with eager through `compiler.jit` while its prims through torch agree (the
`torch` executor alone) has a fusion nvFuser computes wrongly. Here every fusion call runs twice:
through nvFuser, and its region's prims through torch on copies of the same inputs. The first
output of each fusion that differs (values beyond the tolerance, relative to the largest value, or
shape) is reported with the region's inputs (shapes, strides, dtypes), its prims and the
FusionDefinition's source: enough to run that fusion alone. Values that differ are refereed by the
prims run in float64 (every floating dtype of the region, its conversions too, made float64): torch
rounds a bf16 or fp16 value after every prim where nvFuser computes a region in fp32, and at large
logits a softmax's per-prim rounding moves it by tens of percent. A fusion is wrong only where it
is further from float64 than twice torch's prims are. Without CUDA and nvFuser (or with
`--fake`) the fusions run through the CPU fake of nvfuser_direct, which checks the translation.
Exit status 1 when a fusion disagreed.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from compiler.core.executor import Region
from compiler.executors.nvfuser.define.translations import fusion_source
from compiler.executors.nvfuser.executor import NvFusion, unavailable_reason
from compiler.executors.region_split import torch_function

TOLERANCE = 1e-3  # largest difference over the largest magnitude of the output


@dataclass
class WrongFusion:
    """A fusion call whose output `output` differs from its prims run by torch."""

    name: str
    output: int
    error: float  # largest difference over the largest magnitude (inf: a shape or dtype differs)
    report: str  # the region's inputs, prims and definition source
    refereed: tuple[float, float] | None = None  # (the fusion's, torch's) errors against float64

    def __str__(self) -> str:
        error = "a different shape or dtype" if self.error == float("inf") else f"relative error {self.error:.2e}"
        if self.refereed is not None:
            error += f" (against float64: {self.refereed[0]:.2e}, torch's prims {self.refereed[1]:.2e})"
        return f"{self.name} output {self.output}: {error}\n{self.report}"


def _error(got: Any, want: Any) -> float:
    if not isinstance(want, torch.Tensor):
        return 0.0 if got == want else float("inf")
    if not isinstance(got, torch.Tensor) or got.shape != want.shape or got.dtype != want.dtype:
        return float("inf")
    if want.numel() == 0:
        return 0.0
    if not want.is_floating_point():
        return 0.0 if torch.equal(got, want) else float("inf")
    g, w = got.detach().double(), want.detach().double()
    both_nan = g.isnan() & w.isnan()
    difference = (g - w).abs().masked_fill(both_nan, 0).max()
    scale = w.abs().masked_fill(~w.isfinite(), 0).max().clamp_min(1e-12)
    return (difference / scale).item() if difference.isfinite() else float("inf")


def _values_error(got: Any, exact: Any) -> float:
    """`_error` of the values alone, against a float64 result of the same shape."""
    if not isinstance(got, torch.Tensor) or not isinstance(exact, torch.Tensor) or got.shape != exact.shape:
        return float("inf")
    return _error(got.detach().double(), exact.detach().double())


def _widened(value: Any) -> Any:
    return torch.float64 if isinstance(value, torch.dtype) and value.is_floating_point else value


def float64_function(region: Region) -> Any:
    """`region`'s prims run by torch in float64: every floating dtype a prim names (conversions,
    fills) is float64; call it with the floating inputs in float64."""
    widened = tuple(
        b.replace(args=tuple(map(_widened, b.args)), kwargs={k: _widened(v) for k, v in b.kwargs.items()})
        for b in region.bsyms
    )
    return torch_function(Region(region.name, widened, region.inputs, region.outputs))


def _exact_inputs(args: tuple) -> list:
    return [a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]


def _exact_outputs(region: Region, copies: list) -> list | None:
    """`region`'s outputs from its prims in float64, or None where float64 cannot run them."""
    try:
        return _listed(float64_function(region)(*_exact_inputs(copies)))
    except (RuntimeError, TypeError):  # NOTE: a prim torch has no float64 kernel for
        return None


def _listed(value: Any) -> list:
    return list(value) if isinstance(value, (tuple, list)) else [value]


def _report(fusion: NvFusion, args: tuple) -> str:
    region = fusion.region
    lines = ["  inputs:"]
    for proxy, value in zip(region.inputs, args):
        if isinstance(value, torch.Tensor):
            lines.append(f"    {proxy.name}: {value.dtype} {tuple(value.shape)} strides {value.stride()}")
        else:
            lines.append(f"    {proxy.name}: {value!r}")
    lines.append("  prims:")
    lines += [f"    {str(b).splitlines()[0]}" for b in region.bsyms]
    try:
        lines.append(fusion_source(region, fusion.descriptors())[0])
    except Exception as error:  # NOTE: the report goes on without the source
        lines.append(f"  (no definition source: {type(error).__name__}: {error})")
    return "\n".join(lines)


@contextlib.contextmanager
def checking_fusions(tolerance: float = TOLERANCE) -> Iterator[list[WrongFusion]]:
    """Within it, every nvFuser fusion call is checked against its prims run by torch; the list
    yielded collects the first disagreeing output of each fusion (one entry per fusion name)."""
    found: list[WrongFusion] = []
    reported: set[str] = set()
    original = NvFusion.__call__

    def checked(self: NvFusion, *args: Any) -> Any:
        copies = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        got = original(self, *args)
        if self.name in reported:
            return got
        want = torch_function(self.region)(*[a.clone() if isinstance(a, torch.Tensor) else a for a in copies])
        exact = functools.cache(lambda: _exact_outputs(self.region, copies))  # once per call, where needed
        for index, (g, w) in enumerate(zip(_listed(got), _listed(want))):
            error = _error(g, w)
            if error <= tolerance:
                continue
            outputs = exact() if error < float("inf") else None
            refereed = None if outputs is None else (_values_error(g, outputs[index]), _values_error(w, outputs[index]))
            if refereed is not None and refereed[0] <= max(tolerance, 2 * refereed[1]):
                continue  # nearer float64 than torch's per-prim rounding allows: right
            reported.add(self.name)
            found.append(WrongFusion(self.name, index, error, _report(self, copies), refereed))
            break
        return got

    NvFusion.__call__ = checked
    try:
        yield found
    finally:
        NvFusion.__call__ = original


def check_zoo_model(name: str, *, training: bool = True, fake: bool = False) -> list[WrongFusion]:
    """The wrong fusions of zoo architecture `name`'s call (with its backward when `training`),
    on CUDA through nvFuser, or through the CPU fake when `fake`."""
    import compiler
    from suites._models.hf_zoo_inputs import call_inputs, every_architecture, tiny_model

    known = every_architecture()
    if name not in known:
        raise SystemExit(f"no zoo architecture is named {name!r}; known: {', '.join(sorted(known))}")
    zoo = known[name]
    device = torch.device("cpu" if fake else "cuda")
    model = tiny_model(zoo, device).train(training)
    inputs = call_inputs(zoo, training, device)
    from scripts.compile_profile import fake_nvfuser

    with fake_nvfuser() if fake else contextlib.nullcontext(), checking_fusions() as found:
        jitted = compiler.jit(copy.deepcopy(model), executors=["nvfuser", "torch"] if fake else None)
        with torch.set_grad_enabled(training):
            output = jitted(**inputs)
            if training:
                loss = output["loss"] if output.get("loss") is not None else output[0].float().sum()
                loss.backward()
    return found


def main(argv: list[str] | None = None) -> int:
    """Checks one zoo architecture's call; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("architecture", help="a zoo architecture's name (suites/_models), e.g. qwen3")
    parser.add_argument("--inference", action="store_true", help="the forward alone (default: forward and backward)")
    parser.add_argument("--fake", action="store_true", help="the CPU fake of nvFuser even where nvFuser runs")
    args = parser.parse_args(argv)
    fake = args.fake or unavailable_reason() is not None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = check_zoo_model(args.architecture, training=not args.inference, fake=fake)
    where = "the CPU fake of nvFuser" if fake else "nvFuser on CUDA"
    for wrong in found:
        print(f"WRONG {wrong}", flush=True)
    print(f"{args.architecture}: {len(found)} fusions disagree with their prims run by torch ({where})")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
