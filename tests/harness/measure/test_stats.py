"""Measurement statistics and the adaptive repeat loop, on a fake clock."""

from __future__ import annotations

import pytest

from fusebench.errors import FusebenchError
from fusebench.measure.measure import collect_samples
from fusebench.measure.stats import quantile, summarize
from tests.support.fakes import FakeClock, ScriptedTimer


def test_summarize_matches_hand_computed_quartiles() -> None:
    stats = summarize([4.0, 1.0, 3.0, 2.0, 10.0])
    # sorted: 1 2 3 4 10; q25 at position 1 -> 2, median at 2 -> 3, q75 at 3 -> 4
    assert (stats.median, stats.q25, stats.q75, stats.iqr) == (3.0, 2.0, 4.0, 2.0)
    assert (stats.min, stats.max, stats.repeats) == (1.0, 10.0, 5)
    assert stats.samples == (4.0, 1.0, 3.0, 2.0, 10.0)


def test_quantile_interpolates_between_order_statistics() -> None:
    assert quantile([0.9, 0.95, 1.0, 1.05, 1.1, 1.2], 0.25) == pytest.approx(0.9625)  # what asv stores
    assert quantile([1.0, 2.0], 0.5) == 1.5
    assert quantile([7.0], 0.75) == 7.0


def test_summarize_rejects_empty_and_negative_samples() -> None:
    with pytest.raises(FusebenchError, match="zero timing samples"):
        summarize([])
    with pytest.raises(FusebenchError, match="non-negative"):
        summarize([1.0, -0.5])


def test_repeats_stop_once_the_budget_is_spent() -> None:
    clock = FakeClock()
    timer = ScriptedTimer(clock, [0.125] * 100)
    prepared: list[int] = []
    samples = collect_samples(
        lambda: None, lambda: prepared.append(1), timer, clock, budget_s=1.0, min_repeats=3, max_repeats=1000
    )
    # each sample spends 0.125 s of the 1.0 s budget: the 8th sample reaches it
    assert len(samples) == 8
    assert len(prepared) == 8  # the untimed preparation ran before every sample


def test_repeats_take_at_least_min_repeats_even_over_budget() -> None:
    clock = FakeClock()
    samples = collect_samples(
        lambda: None, lambda: None, ScriptedTimer(clock, [5.0] * 10), clock, 1.0, min_repeats=4, max_repeats=100
    )
    assert samples == [5.0] * 4


def test_repeats_never_exceed_max_repeats() -> None:
    clock = FakeClock()
    samples = collect_samples(
        lambda: None, lambda: None, ScriptedTimer(clock, [0.0] * 50), clock, 1.0, min_repeats=1, max_repeats=7
    )
    assert len(samples) == 7


def test_adaptive_repeat_count_follows_the_call_time() -> None:
    def count(duration: float) -> int:
        clock = FakeClock()
        timer = ScriptedTimer(clock, [duration] * 10_000)
        return len(collect_samples(lambda: None, lambda: None, timer, clock, 0.5, 5, 10_000))

    assert count(1 / 1024) == 512
    assert count(1 / 64) == 32
    assert count(0.25) == 5  # the minimum
