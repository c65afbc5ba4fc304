"""The scoreboard: rows from a run's outcomes and from recorded results, ratios, the heatmap's cells."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from fusebench.cases.variants import is_ours
from fusebench.history.results import RunInfo, read_results, write_outcomes
from fusebench.history.revision import Revision
from fusebench.measure.machine import machine_info
from fusebench.measure.outcome import Outcome
from fusebench.measure.stats import summarize
from fusebench.report.scoreboard import rows_from_frame, rows_from_outcomes, variant_columns
from fusebench.report.scoreboard_chart import scoreboard_figure
from tests.support.histories import ENV, LATEST_RUN, commit_hash, write_history, write_latest_run


def _outcome(case: str, variant: str, median: float | None, status: str = "ok", detail: str = "") -> Outcome:
    timing = summarize([median * 0.99, median, median * 1.01]) if median else None
    return Outcome("s", case, {"n": 4}, variant, "cpu", status, detail, timing=timing)


def test_ratios_are_to_the_fastest_variant_or_to_the_baseline() -> None:
    (row,) = rows_from_outcomes(
        [
            _outcome("c", "eager", 4e-6),
            _outcome("c", "torch.compile", 2e-6),
            _outcome("c", "fusebench", 1e-6),
            _outcome("c", "thunder", None, "skipped", "not installed"),
        ]
    )
    assert row.fastest().variant == "fusebench" and row.fastest(peers_only=True).variant == "torch.compile"
    assert row.ratio("eager") == pytest.approx(4.0, rel=0.01)
    assert row.ratio("fusebench") == pytest.approx(1.0)
    assert row.ratio("eager", baseline="eager") == pytest.approx(1.0)
    assert row.ratio("fusebench", baseline="eager") == pytest.approx(0.25, rel=0.01)
    assert row.ratio("thunder") is None and row.ratio("eager", baseline="thunder") is None
    assert row.cells["thunder"].status == "skipped" and row.cells["thunder"].detail == "not installed"
    assert [is_ours(v) for v in ("fusebench", "fusebench-torch", "eager", "fusebenchmark")] == [
        True,
        True,
        False,
        False,
    ]


def test_rows_from_results_keep_each_variants_latest_measurement_and_its_reason(tmp_path: Path) -> None:
    write_history(tmp_path, commits=3, step_at=1)
    write_latest_run(tmp_path, "history-machine")  # a newer commit of another suite, same machine
    rows = rows_from_frame(read_results(tmp_path))
    assert [(row.suite, row.case) for row in rows] == [
        ("dynamic_split", "dynamic_split"),
        ("gelu_backward", "gelu_bias_backward"),
        ("gelu_backward", "gelu_bias_backward"),
        ("host_overhead", "one_op"),
        ("host_overhead", "twenty_ops"),
    ]
    one_op, twenty_ops = rows[3], rows[4]
    assert variant_columns(rows) == ["eager", "torch.compile", "fusebench", "fusebench-torch", "thunder"]
    for row in (one_op, twenty_ops):
        for variant, cell in row.cells.items():
            expected = LATEST_RUN[(row.case, variant)]
            if isinstance(expected, float):
                assert cell.status == "ok" and cell.seconds == pytest.approx(expected, rel=0.05)
            else:
                assert (cell.status, cell.detail) == expected and cell.seconds is None
    assert twenty_ops.cells["eager"].kernels == 20 and twenty_ops.cells["fusebench"].fusions == 1
    gelu_f32 = next(row for row in rows if "float32" in row.params and row.case == "gelu_bias_backward")
    assert gelu_f32.cells["fusebench"].commit == commit_hash(2)  # the third commit (index 2), stepped up
    assert gelu_f32.cells["fusebench"].seconds == pytest.approx(168e-6, rel=0.03)


def test_the_heatmap_colours_ratios_and_shows_statuses_with_their_reasons() -> None:
    (row,) = rows_from_outcomes(
        [
            _outcome("c", "eager", 4e-6),
            _outcome("c", "fusebench", 1e-6),
            _outcome("c", "fusebench-torch", None, "unsupported", "prims.erf is not <supported>"),
            _outcome("c", "thunder", None, "failed", "max abs error 0.5"),
        ]
    )
    ratios, statuses = scoreboard_figure([row]).data
    assert list(ratios.x) == ["eager", "fusebench", "fusebench-torch", "thunder"]
    assert ratios.z[0][0] == pytest.approx(2.0, rel=0.01) and ratios.z[0][1] == 0.0  # log2 of 4x and of 1x
    assert math.isnan(ratios.z[0][2]) and statuses.z[0][2] == 0.5 and statuses.z[0][3] == 1.0
    assert ratios.text[0][1].startswith("<b>1.00 µs") and ratios.text[0][0] == "4.00 µs<br>4.00×"
    assert statuses.text[0][2:] == ["unsupported", "failed"]
    assert "<b>unsupported</b>: prims.erf is not &lt;supported&gt;" in ratios.customdata[0][2]
    with_baseline = scoreboard_figure([row], baseline="eager").data[0]
    assert with_baseline.z[0][1] == pytest.approx(-2.0, rel=0.01) and (with_baseline.zmin, with_baseline.zmax) == (
        -2,
        2,
    )


def test_a_row_without_the_baseline_shows_times_without_colour() -> None:
    (row,) = rows_from_outcomes([_outcome("c", "fusebench", 1e-6), _outcome("c", "eager", None, "skipped", "no")])
    ratios, statuses = scoreboard_figure([row], baseline="eager").data
    assert math.isnan(ratios.z[0][1]) and statuses.z[0][1] == 0.0 and statuses.text[0][1] == "1.00 µs"


def test_cells_older_than_the_rest_of_their_row_are_marked(tmp_path: Path) -> None:
    write_history(tmp_path, commits=2, step_at=5)
    newer = Revision("0" * 40, 1_800_000_000_000, False)  # dated after the history, with a hash that sorts first
    only_fusebench = Outcome(
        "dynamic_split", "dynamic_split", {"shape": (4, 64, 256), "dtype": "float32"}, "fusebench", "cpu", "ok",
        timing=summarize([1e-3, 1e-3, 1e-3]),
    )  # fmt: skip
    write_outcomes(tmp_path, RunInfo(machine_info("history-machine"), newer, ENV), [only_fusebench])
    older_eager = Outcome(**{**only_fusebench.__dict__, "variant": "eager", "timing": summarize([2e-3] * 3)})
    write_outcomes(tmp_path, RunInfo(machine_info("history-machine"), Revision("f" * 40, 0, False), ENV), [older_eager])
    (row,) = [row for row in rows_from_frame(read_results(tmp_path)) if row.case == "dynamic_split"]
    assert row.newest_commit() == "0" * 40 and row.cells["eager"].commit == "f" * 40
    ratios = scoreboard_figure([row]).data[0]
    assert list(ratios.x) == ["eager", "fusebench"]
    assert ratios.text[0] == ["2.00 ms*<br>2.00×", "<b>1.00 ms<br>1.00×</b>"]


def test_a_crashed_cell_shows_as_crashed_with_how_its_worker_died() -> None:
    (row,) = rows_from_outcomes(
        [_outcome("c", "eager", 4e-6), _outcome("c", "fusebench", None, "crashed", "killed by SIGSEGV")]
    )
    ratios, statuses = scoreboard_figure([row]).data
    assert math.isnan(ratios.z[0][1]) and statuses.z[0][1] == 1.0 and statuses.text[0][1] == "crashed"
    assert "<b>crashed</b>: killed by SIGSEGV" in ratios.customdata[0][1]
