"""Progress lines (fusebench/report/progress.py): the outcome, then how long the measurement took."""

from __future__ import annotations

import io

from fusebench.measure.outcome import Outcome
from fusebench.measure.stats import summarize
from fusebench.report.progress import Progress, format_eta
from fusebench.report.table import HEADERS, row_cells
from tests.support.fakes import FakeClock


def _line(outcome: Outcome) -> str:
    stream = io.StringIO()
    progress = Progress(12, stream, FakeClock())
    progress.start("suite.case(n=4)", outcome.variant)
    progress.finish(outcome)
    return stream.getvalue()


def test_a_timed_measurement_shows_its_median_iqr_and_how_long_it_took() -> None:
    timing = summarize([2e-3, 2e-3, 3e-3])
    outcome = Outcome("suite", "case", {"n": 4}, "fusebench", "cpu", "ok", timing=timing, duration=48.25)
    assert (
        _line(outcome) == "[ 1/12] suite.case(n=4) fusebench ... 2.00 ms, IQR 500 µs (3 repeats) | 48.2 s | ETA 0 s\n"
    )


def test_the_progress_line_spread_is_the_tables_iqr_column() -> None:
    timing = summarize([1e-3, 2e-3, 4e-3, 8e-3, 9e-3])
    outcome = Outcome("suite", "case", {"n": 4}, "eager", "cpu", "ok", timing=timing, duration=1.0)
    iqr = row_cells(outcome)[HEADERS.index("IQR")]
    assert iqr == "6.00 ms" and f"4.00 ms, IQR {iqr} (5 repeats)" in _line(outcome)


def test_a_crash_has_no_duration_to_show() -> None:
    outcome = Outcome("suite", "case", {"n": 4}, "fusebench", "cuda", "crashed", "killed by SIGSEGV")
    line = _line(outcome)
    assert line.startswith("[ 1/12] suite.case(n=4) fusebench ... crashed") and " s | " not in line, line


def test_the_eta_is_the_pace_so_far_times_the_measurements_left() -> None:
    clock, stream = FakeClock(), io.StringIO()
    progress = Progress(5, stream, clock)
    outcome = Outcome("suite", "case", {"n": 4}, "eager", "cpu", "skipped", "needs CUDA")
    for seconds in (30.0, 90.0):  # 2 done in 120 s: 60 s each, 3 left
        progress.start("suite.case(n=4)", "eager")
        clock.advance(seconds)
        progress.finish(outcome)
    assert stream.getvalue().splitlines()[-1].endswith("skipped: needs CUDA | ETA 3 min 00 s")
    for _ in range(3):
        progress.start("suite.case(n=4)", "eager")
        progress.finish(outcome)
    assert "ETA" not in stream.getvalue().splitlines()[-1]  # nothing left
    assert [format_eta(s) for s in (4.4, 59.6, 185, 3725)] == ["4 s", "1 min 00 s", "3 min 05 s", "1 h 02 min"]
