"""Running two revisions' benchmarks in interleaved rounds, each side in its own process.

A side is a revision checked out into a worktree. One run of a side is that worktree's own
`python -m fusebench run ... --json PATH`, started with this interpreter (so the same installed
packages) and with the worktree first on PYTHONPATH and as working folder, so it imports its own
`compiler`, `fusebench` and `suites`. Rounds alternate the order (A B, B A, A B, ...): a drift of
the machine (clock boosting, a neighbour's load, a warming room) hits both sides alike.

A run that ends without writing its JSON (it crashed, or its selection matched nothing) is kept
as a `SideRun` with `error` set to the end of its stderr.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fusebench.files import read_json
from fusebench.history.peer_cache import REUSE_ENV
from fusebench.measure.paired import PAIRED_ENV

STDERR_TAIL_LINES = 15
Report = Callable[[str], None]


@dataclass(frozen=True)
class Side:
    """One side of a comparison: its label ("A" or "B"), the revision as named, its commit, its checkout."""

    label: str
    revision: str
    commit: str
    worktree: Path


@dataclass
class SideRun:
    """One `fusebench run` of one side: its outcomes (as `--json` wrote them) or why there are none."""

    side: str
    round: int
    returncode: int
    seconds: float
    outcomes: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    look: int = 0  # 0: a planned round; k: a round of the k-th follow-up batch (fusebench.compare.followup)


def run_side(
    side: Side,
    run_args: Sequence[str],
    scratch: Path,
    round_index: int,
    report: Report,
    environment: Mapping[str, str] | None = None,
) -> SideRun:
    """Runs `fusebench run RUN_ARGS` of `side` once, with `environment` added to this process's;
    forwards its progress lines to `report`."""
    json_path = scratch / f"{side.label}-round{round_index}.json"
    json_path.unlink(missing_ok=True)  # a run that writes no result must not be credited with a stale one
    command = [
        sys.executable,
        "-m",
        "fusebench",
        "run",
        *run_args,
        "--json",
        str(json_path),
        "--results",
        str(scratch / f"results-{side.label}"),
    ]
    python_path = [str(side.worktree), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    # NOTE: every round measures every variant: a peer reused from an earlier round
    # (fusebench.history.peer_cache) would give the comparison the same samples again; and no
    # paired samples of fusebench and its peers (fusebench.measure.paired): the verdict here is
    # between revisions. Environment variables, not flags: an older revision ignores them.
    env = {
        **os.environ,
        **(environment or {}),
        "PYTHONPATH": os.pathsep.join(python_path),
        REUSE_ENV: "0",
        PAIRED_ENV: "0",
    }
    tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
    start = time.perf_counter()
    process = subprocess.Popen(
        command, cwd=side.worktree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stderr is not None
        for line in process.stderr:
            tail.append(line.rstrip("\n"))
            report(f"  {side.label} {line.rstrip()}")
        returncode = process.wait()
    finally:
        _stop(process)
    seconds = time.perf_counter() - start
    if not json_path.exists():
        last = "\n".join(tail) or "(no output)"
        return SideRun(side.label, round_index, returncode, seconds, error=f"exit status {returncode}:\n{last}")
    document = read_json(json_path)
    return SideRun(side.label, round_index, returncode, seconds, outcomes=list(document.get("outcomes", [])))


def interleaved_rounds(
    sides: tuple[Side, Side],
    run_args: Sequence[str],
    scratch: Path,
    rounds: int,
    report: Report,
    environment: Mapping[str, str] | None = None,
    runs: dict[str, list[SideRun]] | None = None,
    *,
    first: int = 0,
    total: int | None = None,
    look: int = 0,
    keep: Callable[[dict[str, Any]], bool] | None = None,
) -> dict[str, list[SideRun]]:
    """Runs both sides `rounds` times, alternating which goes first; the runs of each side by label,
    appended to `runs` as each ends (so a caller interrupted midway still holds the finished ones).
    `environment` is added to each run's (`fusebench compare` passes the thread count this way).
    Follow-up rounds (`fusebench.compare.followup`) number on from `first` (of `total` at most),
    mark their runs with their `look`, and keep only the outcomes `keep` accepts.

    Only the first round records the compiler's artifacts (traces, fusion definitions, nvFuser
    segmentation, which `why` reads): they are the same every round, and profiling the
    segmentation costs seconds per measurement on a GPU.
    """
    runs = runs if runs is not None else {}
    for side in sides:
        runs.setdefault(side.label, [])
    total = total or first + rounds
    prefix = "follow-up " if look else ""
    for round_index in range(first, first + rounds):
        order = sides if round_index % 2 == 0 else sides[::-1]
        round_args = list(run_args) if round_index == 0 else [*run_args, "--no-artifacts"]
        for side in order:
            name = f"{prefix}round {round_index + 1}/{total}"
            report(f"{name}: {side.label} = {side.revision} ({side.commit[:8]})")
            run = run_side(side, round_args, scratch, round_index, report, environment)
            run.look = look
            if keep is not None:
                run.outcomes = [outcome for outcome in run.outcomes if keep(outcome)]
            status = f"failed ({run.error.splitlines()[0]})" if run.error else f"{len(run.outcomes)} measurements"
            report(f"{name}: {side.label} done in {run.seconds:.1f} s: {status}")
            runs[side.label].append(run)
    return runs


def _stop(process: subprocess.Popen) -> None:
    """Ends a child that is still running (after Ctrl-C or an error here), politely first."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
