"""Noise from control rows: the run's line, compare's line, and their thresholds."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fusebench.commands.compare import comparison_noise
from fusebench.compare.comparison import BenchmarkComparison, SideSummary
from fusebench.measure.noise import (
    DRIFT_THRESHOLD,
    SHIFT_THRESHOLD,
    SPREAD_THRESHOLD,
    machine_noise,
    round_drift,
    run_noise,
)
from fusebench.measure.outcome import Outcome
from fusebench.measure.stats import summarize


def _outcome(variant: str, samples: list[float]) -> Outcome:
    return Outcome("s", "c", {}, variant, "cpu", "ok", timing=summarize(samples))


def test_a_quiet_run_and_a_noisy_one() -> None:
    rng = np.random.default_rng(0)
    quiet = [_outcome("eager", list(1e-3 * rng.lognormal(0, 0.01, 100))) for _ in range(4)]
    plateaus = [1e-5] * 50 + [8e-3] * 30 + [2.4e-2] * 20  # a tiny op on threads fighting for cores
    noisy = [_outcome("eager", plateaus) for _ in range(3)] + quiet[:2]
    assert not run_noise(quiet).noisy and run_noise(quiet).line().startswith("machine quiet: 4 control (eager) rows")
    line = run_noise(noisy).line()
    assert run_noise(noisy).noisy and line.startswith("machine noisy: 5 control (eager) rows spread ")
    assert "--threads 1" in line


def test_a_tail_of_interrupted_samples_is_noise_the_iqr_misses() -> None:
    preempted = [1e-3] * 85 + [2.5e-2] * 15  # 15% of the samples waited for a core
    outcomes = [_outcome("eager", preempted) for _ in range(3)]
    noise = run_noise(outcomes)
    assert noise.spread == 0.0 and noise.tail == 0.15 and noise.noisy
    assert "had 15% of samples above 2x their median (noisy above 5%)" in noise.line()


def test_only_control_rows_count() -> None:
    wild = [_outcome("fusebench", [1e-5, 1e-2, 5e-3, 2e-2])]
    assert run_noise(wild).controls == 0 and run_noise(wild).line() == ""


def test_one_odd_control_row_is_not_a_noisy_machine() -> None:
    assert not machine_noise([0.02, 0.03, 0.9]).noisy
    assert machine_noise([0.02, 0.9, 0.9]).noisy
    assert machine_noise([SPREAD_THRESHOLD * 1.01]).noisy and not machine_noise([SPREAD_THRESHOLD]).noisy


def test_drift_between_rounds_of_compares_control_rows() -> None:
    assert round_drift([1.0]) is None
    assert round_drift([1.0, 1.0, 1.0]) == 0.0
    steady = [list(np.full(20, 1e-3)) for _ in range(4)]
    drifting = [list(np.full(20, m)) for m in (1e-3, 1.4e-3, 0.8e-3, 1.2e-3)]

    def comparison(variant: str, rounds_a: list, rounds_b: list) -> BenchmarkComparison:
        a = SideSummary("ok", rounds=rounds_a, round_medians=[r[0] for r in rounds_a])
        b = SideSummary("ok", rounds=rounds_b, round_medians=[r[0] for r in rounds_b])
        return BenchmarkComparison("s", "c", {}, variant, a, b, "no change")

    quiet = comparison_noise([comparison("eager", steady, steady), comparison("fusebench", drifting, drifting)])
    assert not quiet.noisy and quiet.drift == 0.0
    noisy = comparison_noise([comparison("eager", drifting, drifting)])
    assert noisy.noisy and noisy.drift > DRIFT_THRESHOLD
    assert "moved" in noisy.line() and "between rounds" in noisy.line()


def test_the_report_says_which_machine_was_noisy() -> None:
    import pandas as pd

    from fusebench.report.noise import noise_html

    rows = [
        {"machine": m, "env": "cpu", "metric": "time_call", "variant": v, "value": 1.0, "q25": 0.9, "q75": q75,
         "date": 1}
        for m, q75 in (("busy", 1.5), ("calm", 1.02))
        for v in ("eager", "fusebench")
    ]  # fmt: skip
    page = noise_html(pd.DataFrame(rows), {"noise": {"line": "machine noisy: 2 control (eager) rows", "noisy": True}})
    assert "<p class='bad'>busy (cpu), newest commit: machine noisy: 1 control (eager) rows spread 60%" in page
    assert "<p class='meta'>calm (cpu), newest commit: machine quiet: 1 control (eager) rows spread 12%" in page
    assert "<p class='bad'>comparison: machine noisy: 2 control (eager) rows</p>" in page


def _row(case: str, variant: str, median: float, **paired: float) -> Outcome:
    outcome = Outcome("s", case, {"n": 1}, variant, "cuda", "ok", timing=summarize([median] * 5))
    if paired:
        outcome.extra["paired"] = {
            name.replace("_", "."): {"ratio": r, "spread": 0.02, "pairs": 20} for name, r in paired.items()
        }
    return outcome


def test_a_machine_whose_speed_changed_between_measurements_shows_in_its_paired_ratios() -> None:
    # the H200's zoo rows, llama alone in one process: separate ratios 1.62x, 1.19x, 1.05x where
    # the same variants timed alternately gave 1.12x, 1.12x and 0.90x
    moved = [
        _row("inference", "torch.compile", 3.72e-3), _row("inference", "fusebench", 6.03e-3, torch_compile=1.12),
        _row("training", "torch.compile", 11.3e-3), _row("training", "fusebench", 13.5e-3, torch_compile=1.12),
        _row("decode", "torch.compile", 2.74e-3), _row("decode", "fusebench", 2.88e-3, torch_compile=0.90),
        _row("decode", "eager", 7.4e-3),
    ]  # fmt: skip
    noise = run_noise(moved)
    assert noise.paired == 3 and noise.shift == pytest.approx(math.log(1.05 / 0.90), rel=0.02) and noise.noisy
    line = noise.line()
    assert line.startswith("machine noisy: 1 control (eager) rows spread 0% within a measurement")
    assert "ratios of separate measurements were 17% off the same variants timed alternately (median of 3" in line
    steady = [_row("inference", "torch.compile", 2.82e-3), _row("inference", "fusebench", 2.76e-3, torch_compile=1.01)]
    assert not run_noise([*steady, moved[-1]]).noisy and run_noise([*steady, moved[-1]]).shift < SHIFT_THRESHOLD
    assert run_noise(moved[-1:]).shift is None  # nothing paired: no shift to speak of
