"""Progress lines on stderr:
'[ 3/58] suite.case(params) variant ... 512 µs, IQR 6.20 µs (41 repeats) | 4.2 s | ETA 3 min 05 s':
the median and the interquartile range of the samples, as the final table's `median` and `IQR`
columns show them (docs/harness.md), then how long the whole measurement took (compilation, checks,
counters included), and the ETA. Where the measurements' durations in earlier runs are known
(`fusebench.history.durations`), the ETA is the time the ones left took before, scaled by this
run's pace against those done (a slower machine today stretches it); otherwise it is the wall time
since the run began over measurements done, times those left (with several workers, their joint
pace)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import TextIO

from fusebench.measure.outcome import Outcome
from fusebench.report.table import format_seconds, status_text


class Progress:
    """Prints the start of a measurement's line, then completes it with the outcome."""

    def __init__(
        self,
        total: int,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        expected: Sequence[float | None] | None = None,
    ) -> None:
        """`expected`: per measurement (by its position, 0 to `total` - 1), its duration in an
        earlier run, None where unknown."""
        self.total = total
        self.done = 0
        self.stream = stream or sys.stderr
        self.clock = clock
        self.began = clock()
        known = [s for s in expected or () if s is not None]
        mean = sum(known) / len(known) if known else 0.0
        self.expected = [mean if s is None else s for s in expected] if known and expected else None
        self.expected_total = sum(self.expected) if self.expected else 0.0
        self.expected_left = self.expected_total

    def start(self, case_id: str, variant: str) -> None:
        """Begins the line of the next measurement."""
        self.done += 1
        width = len(str(self.total))
        self.stream.write(f"[{self.done:>{width}}/{self.total}] {case_id} {variant} ... ")
        self.stream.flush()

    def finish(self, outcome: Outcome, position: int | None = None) -> None:
        """Ends the line with the median and IQR (the table's columns), or the status and reason, the
        measurement's duration and the ETA (`position`: which of the `expected` durations it was;
        None: the next in order)."""
        if outcome.status == "ok" and outcome.timing is not None:
            timing = outcome.timing
            text = f"{format_seconds(timing.median)}, IQR {format_seconds(timing.iqr)} ({timing.repeats} repeats)"
        else:
            text = status_text(outcome)
        took = f" | {format_seconds(outcome.duration)}" if outcome.duration > 0 else ""  # none for a crash
        left = self.total - self.done
        eta = f" | ETA {format_eta(self._eta(left, self.done - 1 if position is None else position))}" if left else ""
        self.stream.write(f"{text}{took}{eta}\n")
        self.stream.flush()

    def _eta(self, left: int, position: int) -> float:
        elapsed = self.clock() - self.began
        if self.expected is None:
            return elapsed / self.done * left
        self.expected_left -= self.expected[position]
        expected_done = self.expected_total - self.expected_left
        return self.expected_left * (elapsed / expected_done if expected_done > 0 else 1.0)


def format_eta(seconds: float) -> str:
    """'42 s', '3 min 05 s', '1 h 02 min'."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"
