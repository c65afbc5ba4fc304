"""Synthetic ASV histories for the regression and report tests, written through `write_outcomes`.

`write_history(results, commits=8, step_at=5)` records 8 commits (one day apart) of two suites:
- `gelu_backward.gelu_bias_backward` (two dtypes, variants eager and fusebench): fusebench's time
  per call at float32 steps up by 40% from commit `step_at` on; everything else is flat noise;
- `dynamic_split.dynamic_split` (variant fusebench): recompilations step from 0 to 19 at commit
  `step_at + 1`.
Each point has 30 samples with 1% noise, so the IQR error bars and weights are realistic.

`write_latest_run(results, machine)` records one commit of `host_overhead` as a real CPU run
looks: every variant of the scoreboard, some timed, some unsupported, skipped or failed
(`LATEST_RUN` lists them).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fusebench.history.results import RunInfo, write_outcomes
from fusebench.history.revision import Revision
from fusebench.measure.machine import machine_info
from fusebench.measure.outcome import Outcome
from fusebench.measure.stats import summarize

ENV = "fusebench-cpu-py3.11-torch2.13.0"
DAY_MS = 86_400_000


def commit_hash(index: int) -> str:
    """A made-up 40-digit commit hash whose first 8 digits differ per index."""
    return f"{index + 1:x}".rjust(8, "c") + "0" * 32


def write_history(results: Path, commits: int = 8, step_at: int = 5, seed: int = 0) -> list[str]:
    """Writes the history described in the module doc; returns the commit hashes, oldest first."""
    rng = np.random.default_rng(seed)
    machine = machine_info("history-machine")
    hashes = [commit_hash(i) for i in range(commits)]
    for index, commit in enumerate(hashes):
        run = RunInfo(machine, Revision(commit, 1_700_000_000_000 + index * DAY_MS, False), ENV)
        outcomes = []
        for dtype in ("float32", "bfloat16"):
            for variant, base in (("eager", 300e-6), ("fusebench", 120e-6)):
                slow = variant == "fusebench" and dtype == "float32" and index >= step_at
                median = base * (1.4 if slow else 1.0)
                outcomes.append(_outcome("gelu_backward", "gelu_bias_backward", dtype, variant, median, rng))
        recompilations = 19 if index >= step_at + 1 else 0
        outcomes.append(
            _outcome("dynamic_split", "dynamic_split", "float32", "fusebench", 2e-3, rng, recompilations=recompilations)
        )
        write_outcomes(results, run, outcomes)
    return hashes


def _outcome(
    suite: str, case: str, dtype: str, variant: str, median: float, rng: np.random.Generator, recompilations: int = 0
) -> Outcome:
    samples = list(median * (1 + 0.01 * rng.standard_normal(30)))
    return Outcome(
        suite=suite,
        case=case,
        params={"shape": (4, 64, 256), "dtype": dtype},
        variant=variant,
        device="cpu",
        status="ok",
        timing=summarize(samples),
        compile_seconds=0.2,
        recompilations=recompilations if variant != "eager" else None,
        fusions_per_call=1 if variant != "eager" else None,
        bytes_moved=1_000_000,
        peak_bandwidth_gbs=40.0,
        started_at=1_700_000_000.0,
        duration=0.3,
    )


# (case, variant): median seconds, or (status, reason) for a measurement that gave no time
LATEST_RUN: dict[tuple[str, str], float | tuple[str, str]] = {
    ("one_op", "eager"): 2e-6,
    ("one_op", "torch.compile"): 9e-6,
    ("one_op", "fusebench"): 3e-6,
    ("one_op", "fusebench-torch"): ("unsupported", "prims.sin has no torch implementation <yet>"),
    ("one_op", "thunder"): ("skipped", "lightning-thunder is not installed (pip install lightning-thunder)"),
    ("twenty_ops", "eager"): 140e-6,
    ("twenty_ops", "torch.compile"): 25e-6,
    ("twenty_ops", "fusebench"): 12e-6,
    ("twenty_ops", "fusebench-torch"): ("failed", "output 0 differs from the reference: max abs error 0.5"),
    ("twenty_ops", "thunder"): ("skipped", "lightning-thunder is not installed (pip install lightning-thunder)"),
}


def write_latest_run(results: Path, machine: str, seed: int = 0) -> str:
    """Writes `LATEST_RUN` as one commit of `machine`; returns the commit hash."""
    rng = np.random.default_rng(seed)
    commit = "e" * 40
    run = RunInfo(machine_info(machine), Revision(commit, 1_700_000_000_000, False), ENV)
    outcomes = []
    for (case, variant), result in LATEST_RUN.items():
        if isinstance(result, float):
            outcome = _outcome("host_overhead", case, "float32", variant, result, rng)
            outcome.params = {"numel": 4}
            outcome.kernels_per_call = 20 if (case, variant) == ("twenty_ops", "eager") else 1
        else:
            status, reason = result
            outcome = Outcome("host_overhead", case, {"numel": 4}, variant, "cpu", status, reason)
        outcomes.append(outcome)
    write_outcomes(results, run, outcomes)
    return commit
