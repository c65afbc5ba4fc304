"""`--profile-overhead`: a measurement's wall time split into compile, repeat budget and overhead."""

from __future__ import annotations

import pytest
import torch

from fusebench.cases.variants import EAGER
from fusebench.cli import main
from fusebench.measure.measure import Settings, measure_variant, prepare_case
from fusebench.measure.outcome import Outcome
from fusebench.measure.phases import PHASES
from fusebench.measure.stats import summarize
from fusebench.report.overhead import overhead_of, render_overhead
from tests.support.fakes import tiny_case


def synthetic(variant: str, compile_seconds: float, phases: dict[str, float], duration: float) -> Outcome:
    return Outcome(
        "s", "c", {"n": 4}, variant, "cuda:0", "ok", timing=summarize([1e-3] * 3), compile_seconds=compile_seconds,
        duration=duration, extra={"phases": phases},
    )  # fmt: skip


def test_overhead_is_wall_time_less_compile_time_and_the_repeat_budget() -> None:
    phases = {"prepare_case": 0.5, "prepare": 0.1, "first_call": 2.2, "check": 0.1, "warmup": 0.1, "samples": 1.0,
              "counters": 0.3, "record": 6.0, "write": 0.2}  # fmt: skip
    split = overhead_of(synthetic("fusebench", 2.0, phases, duration=9.8))
    assert split is not None
    assert split.total == pytest.approx(10.5)  # duration + preparing the case + writing
    assert split.budget == pytest.approx(1.1) and split.overhead == pytest.approx(7.4)
    assert split.phases["first_call"] == pytest.approx(0.2)  # the first call less its compile time
    text = render_overhead(
        [split_outcome := synthetic("fusebench", 2.0, phases, 9.8), synthetic("eager", 0.0, {"samples": 1.0}, 1.1)]
    )
    assert split_outcome.variant in text
    first, *_, summary = text.splitlines()[1:]
    assert first.startswith("  s.c(n=4) fusebench: 10.5 s = compile 2.00 s + repeats 1.10 s + overhead 7.40 s (")
    assert "record 6.00 s" in first
    assert summary.startswith(
        "overhead per measurement over 2: mean 3.75 s, median 3.75 s, max 7.40 s (s.c(n=4) fusebench)"
    )
    assert overhead_of(Outcome("s", "c", {}, "v", "cuda", "crashed")) is None
    two = [synthetic("fusebench", 2.0, phases, 9.8), synthetic("eager", 0.0, {"samples": 1.0}, 1.1)]
    last = render_overhead(two, run_seconds=10.0, workers=2).splitlines()[-1]
    assert last == (
        "the run took 10.0 s: measurements 5.80 s per worker (2 side by side), the rest (starting processes, "
        "imports, peak bandwidth) 4.20 s"
    )


def test_a_measurement_records_each_phase() -> None:
    settings = Settings(device=torch.device("cpu"), budget_s=0.01, min_repeats=3)
    case = tiny_case()
    outcome = measure_variant(prepare_case("tiny", case, case.grid(quick=True)[0], settings), EAGER, settings)
    phases = outcome.extra["phases"]
    assert {"prepare", "first_call", "check", "warmup", "samples", "counters", "record"} <= set(phases) <= set(PHASES)
    assert phases["samples"] >= 0.01  # the budget is spent in the timed samples
    assert sum(phases.values()) <= outcome.duration


def test_run_prints_the_breakdown_with_profile_overhead(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("FUSEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    argv = ["run", "--suite", "host_overhead", "-k", "one_op", "--variant", "eager", "--device", "cpu"]
    assert main([*argv, "--repeat-budget", "0.01", "--results", str(tmp_path), "--profile-overhead"]) == 0
    out = capsys.readouterr().out
    assert "\n  host_overhead.one_op(numel=4) eager: " in out and "write " in out
    assert "overhead per measurement over 1: mean " in out and "\nthe run took " in out
