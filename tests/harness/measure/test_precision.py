"""The repeats' stopping rule (fusebench/measure/precision.py): the order-statistic interval of the
median, and repeats that end once it is narrow enough, on scripted samples and a fake clock."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from fusebench.errors import FusebenchError
from fusebench.measure.measure import Settings, collect_samples, measure_variant, prepare_case
from fusebench.measure.precision import (
    PRECISION_ENV,
    PRECISION_MIN_REPEATS,
    PrecisionStop,
    checked_precision,
    lower_rank,
    median_interval,
    relative_half_width,
)
from tests.support.fakes import FakeClock, ScriptedTimer, tiny_case, variant_from

CPU = torch.device("cpu")


def _binomial_cdf(count: int, successes: int) -> float:
    return sum(math.comb(count, i) for i in range(successes + 1)) / 2**count


@pytest.mark.parametrize("count", [6, 10, 25, 50, 101, 400, 5000])
def test_the_lower_rank_is_the_largest_whose_two_tails_stay_within_alpha(count: int) -> None:
    rank = lower_rank(count, 0.95)
    assert rank is not None
    assert 2 * _binomial_cdf(count, rank - 1) <= 0.05 < 2 * _binomial_cdf(count, rank)


def test_ten_samples_give_the_second_and_ninth_order_statistics() -> None:
    samples = [float(value) for value in range(1, 11)]
    assert median_interval(samples) == (2.0, 9.0)


def test_five_samples_are_too_few_for_a_95_percent_interval() -> None:
    assert lower_rank(5, 0.95) is None
    assert median_interval([1.0, 2.0, 3.0, 4.0, 5.0]) is None
    assert relative_half_width([1.0, 2.0, 3.0, 4.0, 5.0]) is None


def test_the_interval_covers_the_median_at_least_as_often_as_promised() -> None:
    # 400 seeded draws of 12 samples from a skewed distribution (exponential, median ln 2): the
    # interval holds the true median in about the promised share (sampling error allowed for)
    generator = torch.Generator().manual_seed(0)
    true_median = math.log(2.0)
    trials, covered = 400, 0
    for _ in range(trials):
        samples = sorted(torch.empty(12).exponential_(generator=generator).tolist())
        low, high = median_interval(samples)  # type: ignore[misc]
        covered += low <= true_median <= high
    assert covered / trials >= 0.93


def test_tight_samples_stop_at_the_first_check_and_spread_ones_never() -> None:
    tight = [1.0 + 0.001 * (i % 3) for i in range(PRECISION_MIN_REPEATS)]
    assert PrecisionStop(0.01)(tight)
    spread = [1.0 + 0.5 * (i % 2) for i in range(200)]
    stop = PrecisionStop(0.01)
    assert not any(stop(spread[:count]) for count in range(1, 201))


def test_the_rule_is_checked_only_as_the_count_grows_by_a_tenth() -> None:
    checked: list[int] = []

    class Counting(PrecisionStop):
        def __call__(self, samples):  # type: ignore[override]
            before = self.next_check
            answer = super().__call__(samples)
            if self.next_check != before:
                checked.append(len(samples))
            return answer

    stop, samples = Counting(0.0001), [1.0 + 0.1 * (i % 5) for i in range(300)]
    for count in range(1, 301):
        stop(samples[:count])
    assert checked[0] == PRECISION_MIN_REPEATS
    assert all(later >= math.ceil(earlier * 1.1) for earlier, later in itertools.pairwise(checked))
    assert len(checked) < 40


def test_collect_samples_stops_when_precise_before_the_budget() -> None:
    clock = FakeClock()
    timer = ScriptedTimer(clock, [1e-3] * 10_000)
    samples = collect_samples(lambda: None, lambda: None, timer, clock, 5.0, 5, 10_000, PrecisionStop(0.01))
    assert len(samples) == PRECISION_MIN_REPEATS and clock() < 5.0


def test_collect_samples_spends_the_budget_when_the_median_stays_uncertain() -> None:
    clock = FakeClock()
    timer = ScriptedTimer(clock, [1e-3 * (1 + i % 2) for i in range(10_000)])
    samples = collect_samples(lambda: None, lambda: None, timer, clock, 1.0, 5, 10_000, PrecisionStop(0.01))
    assert clock() >= 1.0 and len(samples) == pytest.approx(667, abs=2)


def test_a_measurement_with_precision_stops_early_and_without_spends_its_budget() -> None:
    def make(target):
        return lambda x: x * 2

    variant = variant_from("steady", make)
    counts = {}
    for precision in (0.01, 0.0):
        clock = FakeClock()
        settings = Settings(device=CPU, budget_s=1.0, precision=precision)
        prepared = prepare_case("tiny", tiny_case(), {"n": 8}, settings)
        timer = ScriptedTimer(clock, [1e-3] * 10_000)
        outcome = measure_variant(prepared, variant, settings, clock=clock, timer=timer)
        assert outcome.status == "ok", outcome.detail
        counts[precision] = outcome.timing.repeats
    assert counts[0.01] == PRECISION_MIN_REPEATS
    assert counts[0.0] == 1000


def test_checked_precision_reads_the_flag_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PRECISION_ENV, raising=False)
    assert checked_precision(None) == 0.01
    assert checked_precision(0.05) == 0.05
    monkeypatch.setenv(PRECISION_ENV, "0")
    assert checked_precision(None) == 0.0
    with pytest.raises(FusebenchError, match=r"--precision 1.5: expected a fraction from 0"):
        checked_precision(1.5)
    with pytest.raises(FusebenchError, match=r"--precision -0.1: expected a fraction from 0"):
        checked_precision(-0.1)
