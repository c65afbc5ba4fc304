"""Progress lines on stderr:
'[ 3/58] suite.case(params) variant ... 512 µs, IQR 6.20 µs (41 repeats) | 4.2 s | ETA 3 min 05 s':
the median and the interquartile range of the samples, as the final table's `median` and `IQR`
columns show them (docs/harness.md), then how long the whole measurement took (compilation, checks,
counters included), the ETA the time the measurements left will take at the pace of those done
(wall time since the run began over measurements done; with several workers, their joint pace)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from fusebench.measure.outcome import Outcome
from fusebench.report.table import format_seconds, status_text


class Progress:
    """Prints the start of a measurement's line, then completes it with the outcome."""

    def __init__(self, total: int, stream: TextIO | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.total = total
        self.done = 0
        self.stream = stream or sys.stderr
        self.clock = clock
        self.began = clock()

    def start(self, case_id: str, variant: str) -> None:
        """Begins the line of the next measurement."""
        self.done += 1
        width = len(str(self.total))
        self.stream.write(f"[{self.done:>{width}}/{self.total}] {case_id} {variant} ... ")
        self.stream.flush()

    def finish(self, outcome: Outcome) -> None:
        """Ends the line with the median and IQR (the table's columns), or the status and reason, and
        the measurement's duration."""
        if outcome.status == "ok" and outcome.timing is not None:
            timing = outcome.timing
            text = f"{format_seconds(timing.median)}, IQR {format_seconds(timing.iqr)} ({timing.repeats} repeats)"
        else:
            text = status_text(outcome)
        took = f" | {format_seconds(outcome.duration)}" if outcome.duration > 0 else ""  # none for a crash
        left = self.total - self.done
        eta = f" | ETA {format_eta((self.clock() - self.began) / self.done * left)}" if left and self.done else ""
        self.stream.write(f"{text}{took}{eta}\n")
        self.stream.flush()


def format_eta(seconds: float) -> str:
    """'42 s', '3 min 05 s', '1 h 02 min'."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"
