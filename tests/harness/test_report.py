"""`fusebench report`: the HTML holds every section and chart, embeds plotly.js, and renders in Chromium."""

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
from tests.harness.chromium import Chromium, chromium_executable
from tests.harness.histories import commit_hash, write_history

# per suite (2): a history per case, bandwidth, recompilations; plus the ratio chart of the comparison
EXPECTED_CHARTS = 7


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
    assert page.index('id="summary"') < page.index('id="comparison"') < page.index('id="suite-')
    assert oct(report_html.stat().st_mode & 0o777) == "0o644"


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


@pytest.mark.skipif(
    chromium_executable() is None,
    reason="needs Chromium: `apt-get install chromium` (Debian's package; .ci/run installs it)",
)
def test_the_report_renders_in_headless_chromium(report_html: Path, tmp_path: Path) -> None:
    with Chromium(chromium_executable(), tmp_path / "profile") as browser:
        errors = browser.load_page(report_html)
        plots = browser.evaluate("document.querySelectorAll('.js-plotly-plot').length")
        rendered = browser.evaluate(
            "[...document.querySelectorAll('.js-plotly-plot')].filter(p => p.querySelector('.main-svg')"
            " && p.querySelectorAll('.trace, .point, .bars').length > 0).length"
        )
        main_svgs = browser.evaluate("document.querySelectorAll('.main-svg').length")
        shot = browser.screenshot(tmp_path / "report.png")
    artifacts = os.environ.get("FUSEBENCH_TEST_ARTIFACTS")
    if artifacts:
        Path(artifacts).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(artifacts) / "report.png")
    print(f"\nscreenshot: {shot}")
    assert errors == []
    assert plots == rendered == EXPECTED_CHARTS
    assert main_svgs >= EXPECTED_CHARTS  # NOTE: plotly draws 2-3 stacked .main-svg layers per chart
    assert shot.stat().st_size > 50_000
