"""The power study's comparisons as they run: their progress forwarded, an ETA, a log, a time budget.

`scripts/compare_power.py` runs `fusebench compare` once per comparison. Each comparison's progress
lines are forwarded as they come to stderr and to the study's log (`--log`, flushed line by line,
so a study stopped from outside still leaves what it saw), and every finished round adds a line
with the pace and the ETA of the planned rounds left (follow-up rounds, which only noisy rows get,
come on top and are counted as they happen).

With a budget (`--budget S`), at S seconds the comparison running is interrupted as Ctrl-C would:
`fusebench compare` decides the rounds both sides finished and writes them to its JSON, which the
study then counts (`Comparison.interrupted`); and a comparison whose planned rounds the pace so far
says cannot finish in the time left is not started.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from fusebench.report.progress import format_eta

_DONE = re.compile(r"\b(follow-up )?round (\d+)/(\d+): ([AB]) done in ([0-9.]+) s")


def format_duration(seconds: float) -> str:
    """'42 s', '7 min 05 s', '1 h 02 min' as `fusebench run`'s ETA reads; a spent budget reads '0 s'."""
    return format_eta(max(0.0, seconds))


@dataclass
class StudyClock:
    """What the study has planned (comparisons of `rounds` planned rounds each), what its side runs
    took so far, its budget in seconds (None: none) and its log."""

    comparisons: int
    rounds: int
    budget: float | None = None
    log: TextIO | None = None
    started: float = field(default_factory=time.perf_counter)
    side_runs: list[float] = field(default_factory=list)  # seconds of each planned round's run of a side
    follow_up_runs: list[float] = field(default_factory=list)  # follow-ups select a few rows: shorter
    finished: int = 0  # comparisons done

    def say(self, line: str) -> None:
        """One line to stderr and to the log, at once."""
        print(line, file=sys.stderr, flush=True)
        if self.log is not None:
            self.log.write(line + "\n")
            self.log.flush()

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def left(self) -> float | None:
        """Seconds of the budget left (None: no budget)."""
        return None if self.budget is None else self.budget - self.elapsed()

    def pace(self) -> float | None:
        """Mean seconds of one side's run of a planned round so far (None before the first)."""
        return sum(self.side_runs) / len(self.side_runs) if self.side_runs else None

    def planned_left(self, planned_runs_done: int) -> float | None:
        """Seconds the planned rounds left would take at the pace so far: the running comparison's
        and the comparisons not started."""
        pace = self.pace()
        if pace is None:
            return None
        runs = 2 * self.rounds * (self.comparisons - self.finished) - planned_runs_done
        return max(0, runs) * pace

    def can_start_another(self) -> bool:
        """Whether the next comparison's planned rounds fit in the budget at the pace so far."""
        left, pace = self.left(), self.pace()
        return left is None or (left > 0 and (pace is None or 2 * self.rounds * pace <= left))


@dataclass
class Comparison:
    """One `fusebench compare` of the study: its exit status and whether the budget interrupted it."""

    returncode: int
    interrupted: bool


def run_comparison(command: Sequence[str], env: dict[str, str], clock: StudyClock, label: str) -> Comparison:
    """Runs `command` (a `fusebench compare`), forwarding its stderr through `clock` with ETA lines
    after each round; interrupted (SIGINT: it keeps what it finished) when the budget runs out."""
    process = subprocess.Popen(
        list(command), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, bufsize=1
    )
    expired = threading.Event()

    def interrupt() -> None:
        expired.set()
        if process.poll() is None:
            process.send_signal(signal.SIGINT)

    left = clock.left()
    timer = threading.Timer(max(0.0, left), interrupt) if left is not None else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    planned_done, sides_done = 0, 0
    try:
        assert process.stderr is not None
        for raw in process.stderr:
            line = raw.rstrip("\n")
            clock.say(line)
            match = _DONE.search(line)
            if match is None:
                continue
            follow_up = match.group(1) is not None
            (clock.follow_up_runs if follow_up else clock.side_runs).append(float(match.group(5)))
            sides_done += 1
            planned_done += not follow_up
            if sides_done % 2 == 0:
                clock.say(_eta_line(clock, label, match, planned_done))
        returncode = process.wait()
    finally:
        if timer is not None:
            timer.cancel()
        if process.poll() is None:
            process.terminate()
            process.wait()
    clock.finished += 1
    return Comparison(returncode, expired.is_set())


def _eta_line(clock: StudyClock, label: str, match: re.Match, planned_done: int) -> str:
    kind = "follow-up round" if match.group(1) else "round"
    planned = clock.planned_left(planned_done) or 0.0
    budget = f"; budget left {format_duration(clock.left() or 0)}" if clock.budget is not None else ""
    pace = f"{clock.pace():.1f} s" if clock.side_runs else "?"
    follow_ups = sum(clock.follow_up_runs)
    spent = f", {format_duration(follow_ups)} spent on follow-ups so far" if follow_ups else ""
    return (
        f"power study: {label} {kind} {match.group(2)}/{match.group(3)} done at {format_duration(clock.elapsed())}; "
        f"a side's planned run takes {pace}; ETA {format_duration(planned)} for the planned rounds left "
        f"(follow-ups of noisy rows on top{spent}){budget}"
    )


def open_log(path: Path | None) -> TextIO | None:
    """The study's log, line-buffered (None: no log)."""
    if path is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.open("w", buffering=1)
