"""`fusebench report`: the HTML holds every section and chart, embeds plotly.js, and renders in Chromium,
with several commits (histories), one commit (bars) and two machines (a selector)."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from fusebench.cli import main
from fusebench.compare.comparison import compare_runs, comparison_document
from fusebench.compare.interleave import SideRun
from tests.support.chromium import Chromium, chromium_executable
from tests.support.histories import ENV, commit_hash, write_history, write_latest_run

# the dashboard's history; the scoreboard; per suite, a history per (case, params) (dynamic_split 1, gelu_backward 2),
# bandwidth and recompilations; the ratio chart of the comparison
EXPECTED_CHARTS = 1 + (1 + 2) + 2 * 2 + 1 + 1
# the scoreboard; host_overhead: bars per case (one_op, twenty_ops), bandwidth and recompilations
ONE_COMMIT_CHARTS = 1 + 2 + 2


def _side(label: str, scale: dict[str, float], seed: int) -> SideRun:
    rng = np.random.default_rng(seed)
    outcomes = []
    for case, median in (("one_op", 2e-6), ("twenty_ops", 40e-6)):
        samples = list(median * scale.get(case, 1.0) * (1 + 0.01 * rng.standard_normal(200)))
        outcomes.append(
            {
                "suite": "host_overhead", "case": case, "params": {"numel": 4}, "variant": "eager",
                "status": "ok", "detail": "", "timing": {"samples": samples, "median": float(np.median(samples))},
                "compile_seconds": 0.001, "recompilations": None,
            }
        )  # fmt: skip
    return SideRun(label, 0, 0, 1.0, outcomes=outcomes)


@pytest.fixture(scope="module")
def report_inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("report")
    write_history(folder / "results", commits=8, step_at=5)
    comparisons = compare_runs([_side("A", {}, 1)], [_side("B", {"twenty_ops": 2.0}, 2)])
    header = {
        "a": {"revision": "main", "commit": "a" * 40},
        "b": {"revision": "slow", "commit": "b" * 40},
        "device": "cpu",
        "rounds": 1,
        "settings": {"min_effect": 0.05},
    }
    (folder / "compare.json").write_text(json.dumps(comparison_document(comparisons, header)))
    return {"results": folder / "results", "compare": folder / "compare.json", "folder": folder}


@pytest.fixture(scope="module")
def report_html(report_inputs: dict[str, Path]) -> Path:
    output = report_inputs["folder"] / "report.html"
    argv = ["report", "--results", str(report_inputs["results"]), "--compare", str(report_inputs["compare"])]
    assert main([*argv, "-o", str(output)]) == 0
    return output


@pytest.fixture(scope="module")
def one_commit_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("one-commit")
    write_latest_run(folder / "results", "one-machine")
    assert main(["report", "--results", str(folder / "results"), "-o", str(folder / "report.html")]) == 0
    return folder / "report.html"


@pytest.fixture(scope="module")
def two_machines_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("two-machines")
    write_history(folder / "results", commits=3, step_at=1)
    write_latest_run(folder / "results", "machine-b")
    assert main(["report", "--results", str(folder / "results"), "-o", str(folder / "report.html")]) == 0
    return folder / "report.html"


def test_the_report_is_one_offline_file_with_every_section(report_html: Path) -> None:
    page = report_html.read_text()
    assert len(re.findall(r'<div class="chart">', page)) == EXPECTED_CHARTS
    assert "Plotly.newPlot" in page and "plotly.js v" in page  # the library itself is inside the page
    assert re.findall(r"<(?:script|link|img)[^>]*(?:src|href)=", page) == ['<link rel="icon" href=']
    summary = page.split('<h2 id="summary">')[1].split("<h2")[0]
    assert "gelu_backward.gelu_bias_backward" in summary and "track_recompilations" in summary
    assert "Comparison: 1 regressed: twenty_ops (numel=4) eager" in summary
    for heading in ('id="comparison"', 'id="suite-dynamic_split"', 'id="suite-gelu_backward"'):
        assert heading in page
    assert page.index('id="dashboard"') < page.index('id="summary"') < page.index('id="scoreboard"')
    assert page.index('id="scoreboard"') < page.index('id="comparison"')
    dashboard = page.split('<h2 id="dashboard">')[1].split("<h2")[0]
    assert "<td>fusebench</td><td>gelu_backward</td>" in dashboard and "Dashboard over commits" in page
    assert page.index('id="comparison"') < page.index('id="suite-')
    assert "machine-select" not in page.split("<body>")[1]  # one machine: no selector
    assert page.count("commit (oldest first)") == 3  # a history per (case, params)
    assert oct(report_html.stat().st_mode & 0o777) == "0o644"


def test_one_commit_reads_as_bars_and_a_scoreboard_with_statuses(one_commit_html: Path) -> None:
    page = one_commit_html.read_text()
    assert len(re.findall(r'<div class="chart">', page)) == ONE_COMMIT_CHARTS
    assert "host_overhead.one_op: latest time per call at eeeeeeee" in page and "commit (oldest first)" not in page
    scoreboard = page.split('<h2 id="scoreboard">')[1].split("<h2")[0]
    assert "fusebench vs best peer (time per call, &lt; 1× means fusebench is faster): 0.48× ... 1.50×" in scoreboard
    for shown in ("unsupported", "skipped", "failed", "prims.sin has no torch implementation &lt;yet&gt;"):
        assert shown in scoreboard
    summary = page.split('<h2 id="summary">')[1].split("<h2")[0]
    assert re.search(r"No regressions in \d+ series over 1 commit\.</p>", summary), summary
    assert ", 1 commit, 2 cases, machines: one-machine" in page


def test_two_machines_get_a_selector_and_a_section_each(two_machines_html: Path) -> None:
    page = two_machines_html.read_text()
    body = page.split("<body>")[1]
    assert re.findall(r'<option value="(\d)">([^<]+)</option>', body) == [
        ("0", f"history-machine / {ENV}"),
        ("1", f"machine-b / {ENV}"),
    ]
    assert re.findall(r'data-machine="(\d)"( hidden)?>', body) == [("0", ""), ("1", " hidden")] * 3
    headings = re.findall(r'<tr class="place"><th colspan="7">([^<]+)</th></tr>', body)
    assert headings == [f"history-machine / {ENV}"]  # machines head groups of rows: no machine column
    ids = re.findall(r' id="([^"]+)"', body)
    assert len(ids) == len(set(ids)) and {"scoreboard-0", "scoreboard-1", "suite-host_overhead-1"} <= set(ids)


def test_the_baseline_option_picks_the_reference(report_inputs: dict[str, Path], capsys: pytest.CaptureFixture) -> None:
    output = report_inputs["folder"] / "baseline.html"
    argv = ["report", "--results", str(report_inputs["results"]), "-o", str(output)]
    assert main([*argv, "--baseline", "eager"]) == 0
    assert "its ratio to <b>eager</b>" in output.read_text()
    assert main([*argv, "--baseline", "inductor"]) == 2
    assert "--baseline inductor: no variant of that name in the results; expected one of ['eager', 'fusebench']" in (
        capsys.readouterr().err
    )


def test_report_prints_the_flagged_regressions(report_inputs: dict[str, Path], capsys: pytest.CaptureFixture) -> None:
    output = report_inputs["folder"] / "history-only.html"
    assert main(["report", "--results", str(report_inputs["results"]), "-o", str(output)]) == 0
    out = capsys.readouterr().out
    assert "regression: dynamic_split.dynamic_split(shape=(4, 64, 256), dtype='float32') fusebench" in out
    assert f"track_recompilations from 0 in {commit_hash(5)[:8]}..{commit_hash(6)[:8]}" in out
    assert out.strip().endswith(f"2 regressions flagged over 8 commits; report: {output}")


def test_nothing_to_report_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["report", "--results", str(tmp_path / "none"), "-o", str(tmp_path / "r.html")]) == 2
    assert "nothing to report: no results in" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()
    (tmp_path / "bad.json").write_text("{not json")
    assert main(["report", "--compare", str(tmp_path / "bad.json"), "-o", str(tmp_path / "r.html")]) == 2
    assert "--compare" in capsys.readouterr().err


RENDERED = (
    "[...document.querySelectorAll('.js-plotly-plot')].filter(p => p.querySelector('.main-svg')"
    " && p.querySelectorAll('.trace, .point, .bars, .hm').length > 0).length"
)
VISIBLE_WIDTHS = (
    "[...document.querySelectorAll('.js-plotly-plot')].filter(p => p.offsetParent !== null)"
    ".map(p => p.querySelector('.main-svg').getBoundingClientRect().width)"
)

FLAGGED_OVERFLOW = (
    "document.querySelector('table.flagged').getBoundingClientRect().right"
    " - document.querySelector('h2').getBoundingClientRect().right"
)
SELECT_SECOND_MACHINE = (
    "const select = document.getElementById('machine-select');"
    "select.value = '1'; select.dispatchEvent(new Event('change')); select.value"
)


@pytest.mark.skipif(
    chromium_executable() is None,
    reason="needs Chromium: `apt-get install chromium` (Debian's package; .ci/run installs it)",
)
def test_the_reports_render_in_headless_chromium(
    report_html: Path, one_commit_html: Path, two_machines_html: Path, tmp_path: Path
) -> None:
    pages = {"several-commits": (report_html, EXPECTED_CHARTS), "one-commit": (one_commit_html, ONE_COMMIT_CHARTS)}
    shots = []
    with Chromium(chromium_executable(), tmp_path / "profile") as browser:
        for name, (page, charts) in pages.items():
            errors = browser.load_page(page)
            assert errors == [], name
            assert browser.evaluate("document.querySelectorAll('.js-plotly-plot').length") == charts, name
            assert browser.evaluate(RENDERED) == charts, name
            assert browser.evaluate("document.querySelectorAll('.main-svg').length") >= charts
            shots.append(browser.screenshot(tmp_path / f"report-top-{name}.png", max_height=1400))
        assert browser.load_page(two_machines_html) == []
        assert browser.evaluate(FLAGGED_OVERFLOW) <= 0, "the flagged regressions are wider than the page"
        first_widths = browser.evaluate(VISIBLE_WIDTHS)
        browser.evaluate(SELECT_SECOND_MACHINE)
        browser.settle(0.5)
        second_widths = browser.evaluate(VISIBLE_WIDTHS)
        hidden = browser.evaluate("[...document.querySelectorAll('[data-machine]')].map(s => s.hidden)")
        shots.append(browser.screenshot(tmp_path / "report-top-two-machines.png", max_height=1400))
        assert browser.errors() == []
    assert hidden == [True, False] * 3
    assert len(first_widths) == EXPECTED_CHARTS - 1 and len(second_widths) == ONE_COMMIT_CHARTS
    assert min(first_widths + second_widths) > 900  # charts revealed by the selector are resized to the page
    artifacts = os.environ.get("FUSEBENCH_TEST_ARTIFACTS")
    for shot in shots:
        assert shot.stat().st_size > 50_000
        if artifacts:
            Path(artifacts).mkdir(parents=True, exist_ok=True)
            shutil.copy(shot, Path(artifacts) / shot.name)
        print(f"\nscreenshot: {shot}")
