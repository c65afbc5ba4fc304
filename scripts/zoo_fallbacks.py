"""Which fusions of the Hugging Face zoo's models fall back from their fusion compiler to torch:
`python -m scripts.zoo_fallbacks [--models gpt2,llama] [--modes forward,training] [--repros DIR]`.

Each architecture of the zoo's tables (suites/_models/hf_architectures.py and
hf_more_architectures.py, tiny `QUICK` configurations, nothing downloaded) is called as its model
card calls it (suites/_models/hf_zoo_inputs.py) through `compiler.jit` on the device's default
executors (nvFuser on a GPU); a training call backpropagates its loss. For each (architecture,
mode) it prints how many fusions ran and which fell back, forward and backward, and what each runs
as since (the pieces it was cut into that compile, the prims left to torch); then
the fallbacks grouped by what the fusion compiler said (`region_fallback.error_summary`: for
nvFuser, the check that failed and where), each with the fusions that hit it. With `--repros
DIR`, each nvFuser fusion that fell back, and each piece of it that failed too, is written as a
standalone repro script (`compiler.examine.repro`) named after its architecture, mode and fusion
or piece: the smallest failing piece is the smallest repro of what the compiler failed on. A model that fails as
a whole (tracing, a pass, an error outside fusions) is listed with its error.

A fallback costs speed, not correctness: the fusion runs as pieces, or its prims with torch. So the zoo's tests
pass where this script lists failures; run it on a GPU after changing the nvFuser writer, or to
find what to fix next.
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

import compiler
from compiler.executors.region_fallback import error_summary
from suites._models.hf_architectures import Architecture
from suites._models.hf_zoo_inputs import call_inputs, every_architecture, tiny_model, training_loss

MODES = ("forward", "training")
ARCHITECTURES: dict[str, Architecture] = every_architecture()


@dataclass
class Sweep:
    """One (architecture, mode): its fusions, those that fell back, or the error that stopped it."""

    architecture: str
    mode: str
    fusions: int = 0
    # (fusion, what its compiler said, what it runs as since: its pieces that compile, or torch)
    fell_back: list[tuple[str, str, str]] = field(default_factory=list)
    error: str | None = None

    def __str__(self) -> str:
        head = f"{self.architecture} {self.mode}:"
        if self.error is not None:
            return f"{head} FAILED: {self.error}"
        names = ", ".join(f"{name} (now {runs_as})" for name, _, runs_as in self.fell_back)
        return f"{head} {self.fusions} fusions, {len(self.fell_back)} fell back" + (f": {names}" if names else "")


def sweep_one(
    zoo: Architecture,
    mode: str,
    device: torch.device,
    executors: Sequence[str] | None = None,
    fusion: dict[str, Any] | None = None,
    repros: Path | None = None,
) -> Sweep:
    """Runs `zoo` in `mode` ('forward' or 'training') through `compiler.jit` and reads its fusions."""
    result = Sweep(zoo.name, mode)
    training = mode == "training"
    try:
        model = tiny_model(zoo, device).train(training)
        inputs = call_inputs(zoo, training, device)
        jitted = compiler.jit(model, executors=executors, fusion=fusion)
        with warnings.catch_warnings(), torch.set_grad_enabled(training):
            warnings.simplefilter("ignore")
            output = jitted(**inputs)
            if training:
                training_loss(output).backward()
    except Exception as error:  # a model that fails whole is reported, and the sweep goes on
        result.error = error_summary(error)
        return result
    for backward in (False, True) if training else (False,):
        prefix = "backward " if backward else ""
        try:
            listing = compiler.examine.fusions(jitted, backward=backward)
        except (RuntimeError, ValueError):  # no backward was compiled (nothing required grad)
            continue
        result.fusions += len(listing)
        for info in listing:
            if info.fallback_error is None:
                continue
            result.fell_back.append((prefix + info.name, info.fallback_error, info.runner.removesuffix(" (fallback)")))
            if repros is not None and info.runner != "inductor":
                # the fusion, and each piece of it that failed too: the smallest holds the failing ops
                failed = [line.split(":")[0] for line in info.pieces if "FELL BACK" in line]
                for name in (info.name, *failed):
                    path = repros / f"{zoo.name}_{mode}_{prefix.strip() or 'forward'}_{name}.py"
                    _write_repro(jitted, name, path, backward)
    return result


def _write_repro(jitted: Any, name: str, path: Path, backward: bool) -> None:
    try:
        compiler.examine.repro(jitted, name, path, backward=backward)
    except (ValueError, RuntimeError) as error:  # an Inductor or one-op region, or one that never ran
        path.with_suffix(".txt").write_text(f"no repro for {name}: {error}\n")


def grouped(results: Sequence[Sweep]) -> str:
    """The fallbacks grouped by what the fusion compiler said, most frequent first; '' when none fell back."""
    by_error: dict[str, list[str]] = {}
    for result in results:
        for name, error, _ in result.fell_back:
            by_error.setdefault(error, []).append(f"{result.architecture} {result.mode} {name}")
    lines = []
    for error, where in sorted(by_error.items(), key=lambda item: -len(item[1])):
        lines.append(f"{len(where)} x {error}")
        lines.append(f"    {', '.join(where)}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="", help="comma-separated architectures (default: every one)")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated, of: " + ", ".join(MODES))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--repros", type=Path, help="a folder for a repro script of each nvFuser fusion that fell back")
    args = parser.parse_args(argv)
    names = [n for n in args.models.split(",") if n] or list(ARCHITECTURES)
    unknown = [n for n in names if n not in ARCHITECTURES]
    if unknown:
        parser.error(f"--models: unknown architectures {unknown}; expected some of {sorted(ARCHITECTURES)}")
    modes = [m for m in args.modes.split(",") if m]
    if not modes or any(m not in MODES for m in modes):
        parser.error(f"--modes: expected a comma-separated list of {MODES}, got {args.modes!r}")
    if args.repros is not None:
        args.repros.mkdir(parents=True, exist_ok=True)
    results = []
    for name in names:
        for mode in modes:
            result = sweep_one(ARCHITECTURES[name], mode, torch.device(args.device), repros=args.repros)
            print(result, flush=True)
            results.append(result)
    fell_back = sum(len(r.fell_back) for r in results)
    failed = sum(r.error is not None for r in results)
    print(f"\n{len(results)} runs: {fell_back} fusions fell back (to pieces or torch), {failed} runs failed whole")
    if fell_back:
        print(f"fell back, grouped by what the fusion compiler said:\n{grouped(results)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
