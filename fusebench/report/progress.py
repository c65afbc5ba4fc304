"""Progress lines on stderr: '[ 3/58] suite.case(params) variant ... 512 µs ± 3.1 µs (41 repeats) | 4.2 s',
the last figure being how long the whole measurement took (compilation, checks, counters included)."""

from __future__ import annotations

import sys
from typing import TextIO

from fusebench.measure.outcome import Outcome
from fusebench.report.table import format_seconds, status_text


class Progress:
    """Prints the start of a measurement's line, then completes it with the outcome."""

    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.total = total
        self.done = 0
        self.stream = stream or sys.stderr

    def start(self, case_id: str, variant: str) -> None:
        """Begins the line of the next measurement."""
        self.done += 1
        width = len(str(self.total))
        self.stream.write(f"[{self.done:>{width}}/{self.total}] {case_id} {variant} ... ")
        self.stream.flush()

    def finish(self, outcome: Outcome) -> None:
        """Ends the line with the median and spread, or the status and reason, and the measurement's duration."""
        if outcome.status == "ok" and outcome.timing is not None:
            timing = outcome.timing
            text = f"{format_seconds(timing.median)} ± {format_seconds(timing.iqr / 2)} ({timing.repeats} repeats)"
        else:
            text = status_text(outcome)
        took = f" | {format_seconds(outcome.duration)}" if outcome.duration > 0 else ""  # none for a crash
        self.stream.write(f"{text}{took}\n")
        self.stream.flush()
