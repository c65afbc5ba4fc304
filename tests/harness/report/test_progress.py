"""Progress lines (fusebench/report/progress.py): the outcome, then how long the measurement took."""

from __future__ import annotations

import io

from fusebench.measure.outcome import Outcome
from fusebench.measure.stats import summarize
from fusebench.report.progress import Progress


def _line(outcome: Outcome) -> str:
    stream = io.StringIO()
    progress = Progress(12, stream)
    progress.start("suite.case(n=4)", outcome.variant)
    progress.finish(outcome)
    return stream.getvalue()


def test_a_timed_measurement_shows_its_median_and_how_long_it_took() -> None:
    timing = summarize([2e-3, 2e-3, 3e-3])
    outcome = Outcome("suite", "case", {"n": 4}, "fusebench", "cpu", "ok", timing=timing, duration=48.25)
    assert _line(outcome) == "[ 1/12] suite.case(n=4) fusebench ... 2.00 ms ± 250 µs (3 repeats) | 48.2 s\n"


def test_a_crash_has_no_duration_to_show() -> None:
    outcome = Outcome("suite", "case", {"n": 4}, "fusebench", "cuda", "crashed", "killed by SIGSEGV")
    line = _line(outcome)
    assert line.startswith("[ 1/12] suite.case(n=4) fusebench ... crashed") and "|" not in line, line
