"""The dashboard headline from synthetic outcomes and results: pass rate, speedup, compile time, memory."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from fusebench.history.results import RunInfo, read_results, write_outcomes
from fusebench.history.revision import Revision
from fusebench.measure.machine import machine_info
from fusebench.measure.outcome import TIME, Outcome
from fusebench.measure.stats import summarize
from fusebench.report.dashboard import (
    dashboard,
    dashboard_history,
    latest_measurements,
    measurements_from_outcomes,
    render_dashboard,
)
from fusebench.report.report import build_report, load_inputs

MIB = 1 << 20


def outcome(suite: str, n: int, variant: str, status: str = "ok", seconds: float = 1e-3, **fields) -> Outcome:
    timing = summarize([seconds] * 3) if status == "ok" else None
    return Outcome(suite, "case", {"n": n}, variant, "cuda:0", status, timing=timing, **fields)


def synthetic_run(scale: float = 1.0) -> list[Outcome]:
    """Two suites; fusebench is 2× and 8× faster than eager on `a` (geomean 4×), fails one case of
    `b` and is unsupported on another; thunder is skipped everywhere (not counted)."""
    run = []
    for n, ours in ((1, 0.5e-3), (2, 0.125e-3)):
        run.append(outcome("a", n, "eager", seconds=1e-3, compile_seconds=0.0, peak_device_bytes=4 * MIB))
        run.append(outcome("a", n, "fusebench", seconds=ours * scale, compile_seconds=2.0 * n, peak_device_bytes=MIB))
        run.append(outcome("a", n, "thunder", "skipped"))
    for n in (1, 2, 3):
        run.append(outcome("b", n, "eager", seconds=2e-3, compile_seconds=0.0))
    run.append(outcome("b", 1, "fusebench", seconds=4e-3, compile_seconds=1.0))
    run.append(outcome("b", 2, "fusebench", "failed"))
    run.append(outcome("b", 3, "fusebench", "unsupported"))
    return run


def _paired(o: Outcome, **ratios: float) -> Outcome:
    o.extra["paired"] = {name.replace("_", "."): {"ratio": r, "spread": 0.01, "pairs": 9} for name, r in ratios.items()}
    return o


def test_speedups_come_from_samples_timed_alternately_where_the_run_took_them() -> None:
    """A machine twice as slow while fusebench was measured apart: the medians say 1× and 2×, the
    pairs say fusebench is 2× faster than eager and 1.25× slower than torch.compile."""
    run = [
        outcome("z", 1, "eager", seconds=1e-3),
        _paired(outcome("z", 1, "fusebench", seconds=1e-3), eager=0.5),
        _paired(outcome("z", 1, "torch.compile", seconds=0.5e-3), fusebench=0.8),  # measured after fusebench
        outcome("z", 2, "eager", seconds=1e-3),
        _paired(outcome("z", 2, "fusebench", seconds=0.25e-3), eager=0.5, torch_compile=1.0),  # tc measured before
        outcome("z", 2, "torch.compile", seconds=0.5e-3),
        outcome("z", 3, "eager", seconds=1e-3),
        outcome("z", 3, "torch.compile", seconds=0.25e-3),  # no pairs in this row: the medians
    ]
    entries = {e.variant: e for e in dashboard(measurements_from_outcomes(run))}
    assert entries["fusebench"].speedup == pytest.approx(2.0)  # 1 / 0.5 in both rows
    # 1 / (0.8 * 0.5) = 2.5, 1 / (1.0 * 0.5) = 2, and 4 from the medians
    assert entries["torch.compile"].speedup == pytest.approx((2.5 * 2 * 4) ** (1 / 3))
    assert entries["eager"].speedup == pytest.approx(1.0)


def test_entries_per_variant_and_suite_from_outcomes() -> None:
    entries = {(e.variant, e.suite): e for e in dashboard(measurements_from_outcomes(synthetic_run()))}
    assert set(entries) == {("eager", "a"), ("fusebench", "a"), ("eager", "b"), ("fusebench", "b")}
    ours_a, ours_b, eager_a = entries["fusebench", "a"], entries["fusebench", "b"], entries["eager", "a"]
    assert (ours_a.passed, ours_a.measured, ours_a.pass_rate) == (2, 2, 1.0)
    assert ours_a.speedup == pytest.approx(4.0)  # sqrt(2 * 8)
    assert ours_a.compile_seconds == pytest.approx(3.0)
    assert ours_a.memory_ratio == pytest.approx(4.0)
    assert (ours_b.passed, ours_b.measured) == (1, 3) and ours_b.pass_rate == pytest.approx(1 / 3)
    assert ours_b.speedup == pytest.approx(0.5) and ours_b.memory_ratio is None  # no device memory recorded
    assert eager_a.speedup == pytest.approx(1.0) and eager_a.memory_ratio == pytest.approx(1.0)


def test_the_text_table_lists_every_entry() -> None:
    text = render_dashboard(dashboard(measurements_from_outcomes(synthetic_run())))
    title, header, _rule, *lines = text.splitlines()
    assert title.startswith("dashboard (per variant and suite") and header.split()[:2] == ["variant", "suite"]
    assert [line.split()[:2] for line in lines] == [
        ["eager", "a"],
        ["fusebench", "a"],
        ["eager", "b"],
        ["fusebench", "b"],
    ]
    assert lines[1].split()[2:] == ["2/2", "100%", "4.00×", "3.000", "4.00×"]
    assert lines[3].split()[2:] == ["1/3", "33%", "0.50×", "1.000", "-"]
    assert render_dashboard([]) == ""


def write_commits(results: Path, scales: list[float]) -> None:
    machine = machine_info("dash-machine")
    for index, scale in enumerate(scales):
        revision = Revision(f"{index + 1:08x}" + "0" * 32, 1_700_000_000_000 + index * 86_400_000, False)
        write_outcomes(results, RunInfo(machine, revision, "fusebench-cuda-py3.11-torch2.13.0"), synthetic_run(scale))


def test_the_same_numbers_from_results_and_their_history_over_commits(tmp_path: Path) -> None:
    write_commits(tmp_path, [1.0, 1.0, 2.0])  # fusebench gets 2x slower at the third commit
    frame = read_results(tmp_path)
    latest = {(e.variant, e.suite): e for e in dashboard(latest_measurements(frame))}
    assert latest["fusebench", "a"].speedup == pytest.approx(2.0)
    assert latest["fusebench", "b"].pass_rate == pytest.approx(1 / 3)
    assert latest["fusebench", "a"].memory_ratio == pytest.approx(4.0)
    assert latest["fusebench", "a"].compile_seconds == pytest.approx(3.0)
    history = dashboard_history(frame)
    ours_a = history[(history.variant == "fusebench") & (history.suite == "a")]
    assert list(ours_a.commit.str[:8]) == ["00000001", "00000002", "00000003"]
    assert [round(s, 6) for s in ours_a.speedup] == [4.0, 4.0, 2.0]
    assert list(ours_a.pass_rate) == [1.0, 1.0, 1.0]
    ours_b = history[(history.variant == "fusebench") & (history.suite == "b")]
    assert all(math.isclose(rate, 1 / 3) for rate in ours_b.pass_rate)


def test_the_report_opens_with_the_dashboard_and_charts_peak_device_memory(tmp_path: Path) -> None:
    write_commits(tmp_path / "results", [1.0, 2.0])
    page = build_report(load_inputs(tmp_path / "results", None))
    body = page.split("<body>")[1]
    assert body.index('id="dashboard"') < body.index('id="summary"')
    dashboard_part = body.split('<h2 id="dashboard">')[1].split("<h2")[0]
    assert '<td>fusebench</td><td>a</td><td class="num">2/2 100%</td><td class="num">2.00×</td>' in dashboard_part
    assert "Dashboard over commits" in body
    assert "a: device memory the measurement allocated at its peak (latest commit)" in body
    assert "b: device memory" not in body  # suite b recorded no device memory


def test_results_keep_the_pairs_so_the_reports_dashboard_gives_the_runs_paired_speedups(tmp_path: Path) -> None:
    """The medians say fusebench is 1× eager (the machine slowed while it was measured apart); the
    pairs say 2×. The run's dashboard and the one read back from its results say the same."""
    run = [
        outcome("z", 1, "eager", seconds=1e-3),
        _paired(outcome("z", 1, "fusebench", seconds=1e-3), eager=0.5),
        outcome("z", 1, "torch.compile", seconds=0.5e-3),  # no pairs: its medians
    ]
    machine = machine_info("paired-machine")
    revision = Revision("a" * 40, 1_700_000_000_000, False)
    write_outcomes(tmp_path, RunInfo(machine, revision, "fusebench-cuda-py3.11-torch2.13.0"), run)
    frame = read_results(tmp_path)
    times = frame[frame.metric == TIME.name].set_index("variant")
    assert times.loc["fusebench", "paired"] == {"eager": {"ratio": 0.5, "spread": 0.01, "pairs": 9}}
    assert times.loc["eager", "paired"] is None
    from_results = {e.variant: e.speedup for e in dashboard(latest_measurements(frame))}
    from_run = {e.variant: e.speedup for e in dashboard(measurements_from_outcomes(run))}
    assert from_results == pytest.approx(from_run)
    assert from_results["fusebench"] == pytest.approx(2.0) and from_results["torch.compile"] == pytest.approx(2.0)
    history = dashboard_history(frame)
    assert history[history.variant == "fusebench"].speedup.tolist() == pytest.approx([2.0])


def test_a_suite_whose_cases_name_a_mode_gets_a_row_per_mode(tmp_path: Path) -> None:
    """As PyTorch's dashboard: inference and training of one model suite are rows of their own,
    from a run's outcomes and from its results read back; a suite without modes keeps one row."""
    run = []
    for case, ours in (("fwd", 0.5e-3), ("step", 2e-3)):
        for n in (1, 2):
            run.append(Outcome("zoo", case, {"n": n}, "eager", "cuda:0", "ok", timing=summarize([1e-3] * 3)))
            run.append(Outcome("zoo", case, {"n": n}, "fusebench", "cuda:0", "ok", timing=summarize([ours] * 3)))
    run += synthetic_run()
    modes = {("zoo", "fwd"): "inference", ("zoo", "step"): "training"}
    entries = {(e.variant, e.suite): e for e in dashboard(measurements_from_outcomes(run, modes))}
    assert entries["fusebench", "zoo/inference"].speedup == pytest.approx(2.0)
    assert entries["fusebench", "zoo/training"].speedup == pytest.approx(0.5)
    assert entries["fusebench", "a"].speedup == pytest.approx(4.0) and ("fusebench", "zoo") not in entries
    without = {(e.variant, e.suite) for e in dashboard(measurements_from_outcomes(run))}
    assert ("fusebench", "zoo") in without and ("fusebench", "zoo/training") not in without
    machine = machine_info("dash-machine")
    revision = Revision("1" * 40, 1_700_000_000_000, False)
    write_outcomes(tmp_path, RunInfo(machine, revision, "fusebench-cuda-py3.11-torch2.13.0"), run)
    read_back = {(e.variant, e.suite): e for e in dashboard(latest_measurements(read_results(tmp_path), modes))}
    assert read_back["fusebench", "zoo/training"].speedup == pytest.approx(0.5)
    history = dashboard_history(read_results(tmp_path), modes)
    assert set(history[history.variant == "fusebench"].suite) == {"a", "b", "zoo/inference", "zoo/training"}


def test_the_bundled_model_suites_name_their_modes() -> None:
    from fusebench.report.dashboard import bundled_modes

    modes = bundled_modes()
    assert modes[("hf_zoo", "zoo_inference")] == "inference" and modes[("hf_zoo", "zoo_training")] == "training"
    assert modes[("hf_zoo", "zoo_decode")] == "decode" and modes[("hf_models", "hf_forward_backward")] == "training"
    assert not any(suite == "user_patterns" for suite, _ in modes)


MODEL_SUITE = """
import torch
from fusebench.cases.case import Case


def double(x):
    return x * 2


CASES = [
    Case(
        name=name,
        fn=double,
        make_inputs=lambda params, device, seed: (torch.ones(params["n"], device=device),),
        bytes_moved=lambda params: 8 * params["n"],
        params={"n": [1, 2]},
        mode=mode,
    )
    for name, mode in (("fwd", "inference"), ("step", "training"))
]
"""


def test_a_report_of_user_suites_names_their_modes_where_told_where_the_suites_are(tmp_path: Path) -> None:
    """Results files keep no case metadata: `report --suites DIR` reads a user suite's modes as
    `run --suites DIR` measured them; without it, the suite's cases share one row."""
    from fusebench.cli import main

    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "zoo.py").write_text(MODEL_SUITE)
    run = []
    for case, ours in (("fwd", 0.5e-3), ("step", 2e-3)):
        for n in (1, 2):
            run.append(Outcome("zoo", case, {"n": n}, "eager", "cuda:0", "ok", timing=summarize([1e-3] * 3)))
            run.append(Outcome("zoo", case, {"n": n}, "fusebench", "cuda:0", "ok", timing=summarize([ours] * 3)))
    revision = Revision("2" * 40, 1_700_000_000_000, False)
    results = tmp_path / "results"
    write_outcomes(results, RunInfo(machine_info("modes-machine"), revision, "fusebench-cuda-py3.11-torch2.13.0"), run)
    told, untold = tmp_path / "told.html", tmp_path / "untold.html"
    assert main(["report", "--results", str(results), "--suites", str(suites), "-o", str(told)]) == 0
    assert main(["report", "--results", str(results), "-o", str(untold)]) == 0
    assert "<td>zoo/inference</td>" in told.read_text() and "<td>zoo/training</td>" in told.read_text()
    assert "<td>zoo</td>" in untold.read_text() and "zoo/training" not in untold.read_text()
    assert main(["report", "--results", str(results), "--suites", str(tmp_path / "none"), "-o", str(told)]) == 2
