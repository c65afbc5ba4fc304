"""`fusebench run`'s measurements in this process: in the run's own process (`in_process`), or as a
worker (`serve`, `--worker`) that measures the unit indices its parent sends. Each unit is
recorded as soon as it is measured (`keep`). A run's `--time-limit` is a deadline: no unit starts
after it, and those left are answered as not started (`not_started`).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import sys
import time
from typing import Any

import torch

from compiler.executors.nvfuser.diagnose.profiler_process import shared_profiler
from fusebench.cases.selection import Group
from fusebench.cases.variants import Variant
from fusebench.commands.peer_reuse import Done
from fusebench.commands.run_workers import Unit, unit_outcome
from fusebench.errors import check
from fusebench.history.artifacts import write_artifacts
from fusebench.history.results import RunInfo, write_outcomes
from fusebench.measure.measure import Settings, measure_variant, prepare_case
from fusebench.measure.outcome import Outcome
from fusebench.measure.phases import Phases
from fusebench.measure.turns import device_turn, join_turns
from fusebench.measure.workers import READY, apply_cpu_share, past
from fusebench.report.progress import Progress


def keep(args: argparse.Namespace, run_info: RunInfo, outcome: Outcome) -> None:
    """Records `outcome` in the results, and its compiler record beside them."""
    write_outcomes(args.results, run_info, [outcome])
    directory = write_artifacts(args.results, run_info, outcome)
    if directory is not None:
        outcome.extra["artifacts"] = str(directory)


NOT_STARTED = "not started: the run's time limit"  # how the detail of a unit `not_started` begins


def not_started(unit: Unit, device: str, time_limit_s: float) -> Outcome:
    """The outcome of a unit the run did not start because its `--time-limit` had passed."""
    group, variant = unit
    return unit_outcome(
        group, variant, device, "skipped", f"{NOT_STARTED} ({time_limit_s:g} s, --time-limit) had passed"
    )


def in_process(
    args: argparse.Namespace,
    units: list[Unit],
    run_info: RunInfo,
    settings: Settings,
    indices: list[int],
    done: Done,
    progress: Progress,
    deadline: float | None = None,
) -> dict[int, Outcome]:
    """Measures the units at `indices` one after the other, until `deadline` has passed."""
    outcomes: dict[int, Outcome] = {}
    prepared = Prepared()
    for index in indices:
        if past(deadline):
            break
        group, variant = units[index]
        progress.start(group.case_id, variant.name)
        outcome = measure_unit(args, run_info, settings, prepared, group, variant)
        progress.finish(outcome)
        outcomes[index] = outcome
        done(index, outcome)
    return outcomes


class Prepared:
    """The prepared case of the group measured last: its variants reuse its inputs and reference."""

    def __init__(self) -> None:
        self.group: Group | None = None
        self.case: Any = None


def measure_unit(
    args: argparse.Namespace, run_info: RunInfo, settings: Settings, prepared: Prepared, group: Group, variant: Variant
) -> Outcome:
    """Measures one unit and records it; its phases include preparing the case (the group's first
    unit) and writing the results (`fusebench.measure.phases`)."""
    waited = Phases()
    prepare_s = 0.0
    if prepared.group is not group:
        start = time.perf_counter()
        if settings.device.type == "cuda":
            prepared.case = None  # NOTE: the previous group's tensors go before the next are made
            torch.cuda.empty_cache()
        # NOTE: the reference runs on the device, at full size in float64
        with device_turn(waited.phase("turn_wait")):
            prepared.case = prepare_case(group.suite.name, group.case, group.params, settings)
        prepared.group = group
        prepare_s = time.perf_counter() - start - waited.seconds.get("turn_wait", 0.0)
    outcome = measure_variant(prepared.case, variant, settings)
    start = time.perf_counter()
    keep(args, run_info, outcome)
    phases = outcome.extra.setdefault("phases", {})
    phases.update({"prepare_case": prepare_s, "write": time.perf_counter() - start})
    if "turn_wait" in waited.seconds:
        phases["turn_wait"] = phases.get("turn_wait", 0.0) + waited.seconds["turn_wait"]
    return outcome


def serve(args: argparse.Namespace, units: list[Unit], run_info: RunInfo, settings: Settings) -> int:
    """Worker mode: measures the unit indices read from stdin; answers on `--outcomes-fd`."""
    check(args.outcomes_fd is not None, lambda: "--worker needs --outcomes-fd")
    apply_cpu_share()
    if settings.segments:
        # the child that profiles nvFuser's kernels imports torch and nvFuser while the first units run
        shared_profiler().start()
    prepared = Prepared()
    # NOTE: what the worker has imported (torch, the suites, nvFuser) is never garbage: frozen, the
    # collection each CUDA measurement starts with (MemoryWatch) scans only what measurements made
    gc.freeze()
    device = settings.device
    with os.fdopen(args.outcomes_fd, "w") as answers, join_turns():
        answers.write(json.dumps(READY) + "\n")
        answers.flush()
        for line in sys.stdin:
            group, variant = units[int(line)]
            outcome = measure_unit(args, run_info, settings, prepared, group, variant)
            cuda_error = device.type == "cuda" and outcome.status == "error" and "CUDA" in outcome.detail
            answers.write(json.dumps({**outcome_json(outcome), "worker_exits": cuda_error}) + "\n")
            answers.flush()
            if cuda_error:
                return 3
    return 0


def outcome_json(outcome: Outcome) -> dict[str, Any]:
    """An outcome as JSON, its compiler record left out (it is in the artifacts folder, `extra["artifacts"]`)."""
    data = dataclasses.asdict(outcome)
    del data["artifacts"]
    return data


def run_json(run_info: RunInfo, quick: bool, outcomes: list[Outcome]) -> dict:
    """What `fusebench run --json` writes: the run's machine, commit and every outcome."""
    return {
        "machine": run_info.machine.as_json(),
        "commit": run_info.revision.commit,
        "env_name": run_info.env_name,
        "quick": quick,
        "outcomes": [outcome_json(o) for o in outcomes],
    }
