"""Which fusions of the Hugging Face zoo's models fall back from their fusion compiler to torch:
`python -m scripts.zoo_fallbacks [--models gpt2,llama] [--modes forward,training] [--repros DIR]
[--size gpu]`.

Each architecture of the zoo's tables (suites/_models/hf_architectures.py and
hf_more_architectures.py, tiny `QUICK` configurations, nothing downloaded; with `--size gpu`, at
the sizes the hf_zoo suite measures on a GPU, in bfloat16, where some failures first show: a
kernel's illegal memory access, a scheduler's assert) is called as its model
card calls it (suites/_models/hf_zoo_inputs.py) through `compiler.jit` on the device's default
executors (nvFuser on a GPU); a training call backpropagates its loss. For each (architecture,
mode) it prints how many fusions ran and which fell back, forward and backward, and what each runs
as since (the pieces it was cut into that compile, the prims left to torch); then
the fallbacks grouped by what the fusion compiler said (`region_fallback.error_summary`: for
nvFuser, the check that failed and where), each with the fusions that hit it. With `--repros
DIR`, each nvFuser fusion that fell back, and each piece of it that failed too, is written as a
standalone repro script (`compiler.examine.repro`) named after its architecture, mode and fusion
or piece: the smallest failing piece is the smallest repro of what the compiler failed on. A model that fails as
a whole (tracing, a pass, an error outside fusions) is listed with its error. With `--jobs N`, each
architecture runs in a process of its own, N at a time: one that crashes (nvFuser can) or runs past
`--timeout` is listed so, and the sweep goes on.

A fallback costs speed, not correctness: the fusion runs as pieces, or its prims with torch. So the zoo's tests
pass where this script lists failures; run it on a GPU after changing the nvFuser writer, or to
find what to fix next.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import subprocess
import sys
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

import compiler
from compiler.executors.region_fallback import SUMMARY_CHARS, error_summary
from suites._models.hf_architectures import Architecture
from suites._models.hf_zoo_inputs import (
    AT_GPU_SIZES,
    TINY,
    Scale,
    call_inputs,
    every_architecture,
    tiny_model,
    training_loss,
)

MODES = ("forward", "training")
SIZES: dict[str, Scale] = {"tiny": TINY, "gpu": AT_GPU_SIZES}
ARCHITECTURES: dict[str, Architecture] = every_architecture()
ROOT = Path(__file__).resolve().parent.parent
JSON_PREFIX = "zoo_fallbacks.json: "  # a child process's result line (`--json`)


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
    scale: Scale = TINY,
) -> Sweep:
    """Runs `zoo` in `mode` ('forward' or 'training') at `scale` through `compiler.jit` and reads
    its fusions."""
    result = Sweep(zoo.name, mode)
    training = mode == "training"
    try:
        model = tiny_model(zoo, device, scale).train(training)
        inputs = call_inputs(zoo, training, device, scale)
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
                failed = [piece.name for piece in info.pieces if piece.fallback_error]
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


def _in_child(
    name: str, modes: Sequence[str], device: str, repros: Path | None, timeout: float, size: str = "tiny"
) -> list[Sweep]:
    """`name`'s sweeps run in a process of their own (`--jobs`), which may crash or hang alone."""
    command = [sys.executable, "-X", "faulthandler", "-m", "scripts.zoo_fallbacks", "--models", name]
    command += ["--modes", ",".join(modes), "--device", device, "--size", size, "--json"]
    command += ["--repros", str(repros)] if repros is not None else []
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=ROOT, check=False)
    except subprocess.TimeoutExpired:
        return [Sweep(name, mode, error=f"timed out after {timeout:.0f} s") for mode in modes]
    return child_results(name, modes, done)


def child_results(name: str, modes: Sequence[str], done: subprocess.CompletedProcess) -> list[Sweep]:
    """The sweeps a child process printed (`--json`); each mode it did not print fails with how the
    process ended (a signal: 'crashed (SIGSEGV)') and the last line of its error output."""
    found = {}
    for line in done.stdout.splitlines():
        if line.startswith(JSON_PREFIX):
            fields = json.loads(line[len(JSON_PREFIX) :])
            fields["fell_back"] = [tuple(entry) for entry in fields["fell_back"]]
            found[fields["mode"]] = Sweep(**fields)
    if len(found) < len(modes):
        code = done.returncode
        how = f"crashed ({signal.Signals(-code).name})" if code < 0 else f"exited with status {code}"
        last = next((line.strip() for line in reversed(done.stderr.splitlines()) if line.strip()), "")
        error = f"the process {how}" + (f": {last[:SUMMARY_CHARS]}" if last else "")
        found.update({mode: Sweep(name, mode, error=error) for mode in modes if mode not in found})
    return [found[mode] for mode in modes]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="", help="comma-separated architectures (default: every one)")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated, of: " + ", ".join(MODES))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--size",
        choices=sorted(SIZES),
        default="tiny",
        help="tiny configurations in float32 (default), or the hf_zoo suite's GPU sizes in bfloat16",
    )
    parser.add_argument("--repros", type=Path, help="a folder for a repro script of each nvFuser fusion that fell back")
    parser.add_argument(
        "--jobs",
        type=int,
        default=0,
        help="run each architecture in a process of its own, this many at a time, so that one that crashes or "
        "hangs (--timeout) is reported alone (default 0: all in this process)",
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per architecture with --jobs")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # a child's output (--jobs)
    args = parser.parse_args(argv)
    if args.jobs < 0:
        parser.error(f"--jobs: expected 0 or more processes, got {args.jobs}")
    if args.timeout <= 0:
        parser.error(f"--timeout: expected seconds > 0, got {args.timeout}")
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
    if args.jobs:
        with ThreadPoolExecutor(args.jobs) as pool:
            child = (modes, args.device, args.repros, args.timeout, args.size)
            futures = [pool.submit(_in_child, n, *child) for n in names]
            for future in as_completed(futures):
                for result in future.result():
                    print(result, flush=True)
                    results.append(result)
    else:
        for name in names:
            for mode in modes:
                result = sweep_one(
                    ARCHITECTURES[name], mode, torch.device(args.device), repros=args.repros, scale=SIZES[args.size]
                )
                print(JSON_PREFIX + json.dumps(dataclasses.asdict(result)) if args.json else result, flush=True)
                results.append(result)
    fell_back = sum(len(r.fell_back) for r in results)
    failed = sum(r.error is not None for r in results)
    print(f"\n{len(results)} runs: {fell_back} fusions fell back (to pieces or torch), {failed} runs failed whole")
    if fell_back:
        print(f"fell back, grouped by what the fusion compiler said:\n{grouped(results)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
