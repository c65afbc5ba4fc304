"""`fusebench run`'s side of its worker processes: the units handed out, each answer made an
`Outcome` (a worker that died gives a `crashed` one, recorded here), progress shown as they come
(`fusebench.measure.workers` runs the processes)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import threading
from typing import Any

from fusebench.cases.selection import Group
from fusebench.cases.variants import Variant
from fusebench.commands.peer_reuse import Done
from fusebench.history.results import RunInfo, write_outcomes
from fusebench.measure.outcome import Outcome
from fusebench.measure.paired import may_pair, paired_wanted
from fusebench.measure.workers import Crash, run_units
from fusebench.report.progress import Progress

Unit = tuple[Group, Variant]


def measure_in_workers(
    args: argparse.Namespace,
    units: list[Unit],
    run_info: RunInfo,
    devices: list,
    worker_args: list[str],
    indices: list[int],
    done: Done,
    progress: Progress,
    deadline: float | None = None,
) -> dict[int, Outcome]:
    """Measures the units at `indices` in worker processes on `devices` (`fusebench run`'s
    `--devices`, `--isolate`, `--jobs`); each answer, or crash, is recorded, shown and passed to
    `done` as it comes. None starts after `deadline` (a `time.perf_counter()` value)."""
    position = {index: n for n, index in enumerate(indices)}
    by_unit: dict[int, Outcome] = {}

    def answer(index: int, device: str, data: dict[str, Any] | Crash) -> None:
        group, variant = units[index]
        if isinstance(data, Crash):
            outcome = crashed_outcome(group, variant, device.split("#")[0], data)
            write_outcomes(args.results, run_info, [outcome])
        else:
            data = {k: v for k, v in data.items() if k in _OUTCOME_FIELDS}
            outcome = dataclasses.replace(Outcome.from_json(data), params=dict(group.params))
        with lock:
            by_unit[index] = outcome
            progress.start(f"{group.case_id} [{device}]", variant.name)
            progress.finish(outcome, position[index])
            done(index, outcome)

    lock = threading.Lock()
    paired = paired_wanted(args.no_paired)  # NOTE: a group's paired units stay with one worker
    run_units(
        worker_args,
        devices,
        indices,
        answer,
        lambda line: _print_locked(lock, line),
        group_of=lambda index: id(units[index][0]),
        unit_timeout_s=args.unit_timeout or None,
        together=lambda index: paired and may_pair(units[index][1].name),
        deadline=deadline,
    )
    return by_unit


def crashed_outcome(group: Group, variant: Variant, device: str, crash: Crash) -> Outcome:
    """The outcome of a unit whose worker died (`crash`: how, and its last output; a unit stopped at
    the time limit keeps the limit in `extra["time_limit_s"]`). It carries the case's version, so that
    recording it keeps the other variants' points of the same benchmark."""
    extra = {} if crash.time_limit_s is None else {"time_limit_s": crash.time_limit_s}
    return unit_outcome(group, variant, device, "crashed", crash.detail, extra)


def unit_outcome(
    group: Group, variant: Variant, device: str, status: str, detail: str, extra: dict[str, Any] | None = None
) -> Outcome:
    """The outcome of a unit that was not measured (its worker died, the run's time limit passed),
    with the case's version, so that recording it keeps the other variants' points of its benchmark."""
    case = group.case
    return Outcome(
        group.suite.name,
        case.name,
        dict(group.params),
        variant.name,
        device,
        status,
        detail,
        calls_per_sample=case.calls_per_sample,
        case_version=case.version,
        extra=extra or {},
    )


_OUTCOME_FIELDS = {field.name for field in dataclasses.fields(Outcome)}


def _print_locked(lock: Any, line: str) -> None:
    with lock:
        print(line, file=sys.stderr, flush=True)
