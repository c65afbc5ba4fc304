"""The verdicts of `fusebench compare` on synthetic samples: known effects, known noise, fixed seeds.

Each benchmark is simulated as rounds (processes) of samples: a round's offset (the machine's drift,
log-normal with sd `drift`) times samples with their own noise (log-normal, sd `noise`).
"""

from __future__ import annotations

import numpy as np
import pytest

from fusebench.compare.bootstrap import resampled_quantiles
from fusebench.compare.comparison import BenchmarkComparison, SideSummary, noisy_advice
from fusebench.compare.decide import MAX_ROUNDS, DecisionSettings, decide

FLAGS = ("slower", "faster")


def _side(rng: np.random.Generator, center: float, rounds: int, drift: float, noise: float, n: int = 200) -> list:
    return [list(center * rng.lognormal(0, drift) * rng.lognormal(0, noise, n)) for _ in range(rounds)]


def _paired(rng: np.random.Generator, effect: float, rounds: int, drift: float, noise: float, common: float = 0.0):
    """A and B rounds run side by side: each round's common drift `common` hits both sides alike."""
    a, b = [], []
    for _ in range(rounds):
        shared = rng.lognormal(0, common)
        a += _side(rng, shared, 1, drift, noise)
        b += _side(rng, shared * effect, 1, drift, noise)
    return a, b


def test_a_large_slowdown_missed_by_three_round_medians_is_flagged_with_the_defaults() -> None:
    # NOTE: the noise of the 2-core VM: round medians spread by about 30%, samples by 30%.
    rng = np.random.default_rng(45)
    verdicts = [decide(*_paired(rng, 3.7, 6, 0.3, 0.3)).verdict for _ in range(20)]
    assert verdicts.count("slower") >= 19 and "faster" not in verdicts


def test_power_on_a_busy_machine_model_meets_the_targets() -> None:
    """A 1.5x slowdown flagged in at least 19 of 20, A/A flagged in at most 1 of 20 (6 rounds, rounds
    drifting by 5% on each side and 10% together, samples by 10%)."""
    rng = np.random.default_rng(1)
    slow = [decide(*_paired(rng, 1.5, 6, 0.05, 0.1, common=0.1)).verdict for _ in range(20)]
    same = [decide(*_paired(rng, 1.0, 6, 0.05, 0.1, common=0.1)).verdict for _ in range(20)]
    assert slow.count("slower") >= 19
    assert sum(v in FLAGS for v in same) <= 1


def test_samples_that_waited_for_a_core_do_not_hide_a_slowdown() -> None:
    """Up to 40% of a round's samples on plateaus 10 to 40 times the code's time (a loaded machine):
    the rounds' lower quartiles see the 1.5x slowdown that their medians blur."""
    rng = np.random.default_rng(8)

    def preempted(center: float) -> list:
        rounds = []
        for _ in range(6):
            samples = center * rng.lognormal(0, 0.03, 60)
            waited = rng.random(60) < rng.uniform(0.1, 0.4)
            samples[waited] *= rng.uniform(10, 40, waited.sum())
            rounds.append(list(samples))
        return rounds

    verdicts = [decide(preempted(1.0), preempted(1.5)).verdict for _ in range(20)]
    medians = [decide(preempted(1.0), preempted(1.5), DecisionSettings(quantile=0.5)).verdict for _ in range(20)]
    same = [decide(preempted(1.0), preempted(1.0)).verdict for _ in range(20)]
    assert verdicts.count("slower") >= 19 and medians.count("slower") < 19
    assert not [v for v in same if v in FLAGS]


def test_pairing_cancels_a_drift_that_hits_both_sides_of_a_round() -> None:
    rng = np.random.default_rng(2)
    a, b = _paired(rng, 1.2, 6, 0.005, 0.02, common=0.3)
    assert decide(a, b).paired and decide(a, b).verdict == "slower"
    unpaired = decide(a[:5], b)  # one round of A lost: the sides can no longer be paired
    assert not unpaired.paired and unpaired.verdict == "noisy"


def test_the_decision_is_deterministic() -> None:
    rng = np.random.default_rng(3)
    a, b = _paired(rng, 1.05, 4, 0.03, 0.05)
    assert decide(a, b) == decide(a, b)
    assert decide(a, b, DecisionSettings(seed=1)) != decide(a, b)


def test_a_noisy_row_says_how_many_rounds_would_decide_and_that_many_do() -> None:
    rng = np.random.default_rng(4)
    noisy = decided = 0
    while noisy < 20:
        decision = decide(*_paired(rng, 1.25, 3, 0.08, 0.05))
        assert decision.verdict in ("noisy", "slower")
        if decision.verdict == "slower":
            continue
        noisy += 1
        assert decision.rounds_needed is not None and 3 < decision.rounds_needed <= MAX_ROUNDS
        decided += decide(*_paired(rng, 1.25, decision.rounds_needed, 0.08, 0.05)).verdict == "slower"
    assert decided >= 10  # the estimate is the width needed on average: about half decide, not all


def test_a_change_of_about_the_minimum_effect_needs_no_number_of_rounds() -> None:
    a = _side(np.random.default_rng(5), 1.0, 4, 0.02, 0.02)
    b = [[sample * 1.05 for sample in samples] for samples in a]  # exactly 5% slower in every round
    decision = decide(a, b, DecisionSettings(min_effect=0.05))
    assert decision.verdict == "noisy" and decision.excludes_one and decision.rounds_needed is None


def test_within_the_band_is_no_change_even_when_the_interval_excludes_one() -> None:
    rng = np.random.default_rng(6)
    a, b = _paired(rng, 1.02, 6, 0.002, 0.01)
    decision = decide(a, b)
    assert decision.verdict == "no change" and decision.ci_low > 1
    comparison = BenchmarkComparison("s", "c", {}, "v", SideSummary("ok", rounds=a), SideSummary("ok", rounds=b), "")
    comparison.verdict, comparison.decision = decision.verdict, decision
    assert comparison.notes().startswith("slower by 1.") and "below the minimum effect" in comparison.notes()


def test_notes_and_advice_of_noisy_rows() -> None:
    rng = np.random.default_rng(7)
    a, b = _paired(rng, 1.3, 3, 0.1, 0.05)
    decision = decide(a, b)
    comparison = BenchmarkComparison("s", "c", {}, "v", SideSummary("ok", rounds=a), SideSummary("ok", rounds=b), "")
    comparison.verdict, comparison.decision = decision.verdict, decision
    assert f"would need ~{decision.rounds_needed} rounds (--max-rounds {decision.rounds_needed})" in comparison.notes()
    assert noisy_advice([comparison]) == (
        f"1 noisy row(s) need about {decision.rounds_needed} rounds (--max-rounds {decision.rounds_needed})"
    )


@pytest.mark.parametrize("quantile", [0.5, 0.25])
@pytest.mark.parametrize("n", [7, 64, 65, 200, 1001])
def test_drawn_quantiles_follow_the_bootstrap_distribution_of_the_quantile(n: int, quantile: float) -> None:
    rng = np.random.default_rng(n)
    ordered = np.sort(rng.lognormal(0, 0.3, n))
    drawn = resampled_quantiles(ordered, 4000, np.random.default_rng(0), quantile)
    brute = np.quantile(ordered[np.random.default_rng(1).integers(0, n, size=(4000, n))], quantile, axis=1)
    points = np.union1d(drawn, brute)
    cdf = lambda values: np.searchsorted(np.sort(values), points, side="right") / values.size
    # NOTE: between two order statistics the drawn values interpolate as a resample without ties
    # would, so their distribution is close, not identical: a Kolmogorov-Smirnov distance below 0.08
    assert np.max(np.abs(cdf(drawn) - cdf(brute))) < 0.08
    assert np.std(drawn) == pytest.approx(np.std(brute), rel=0.05)


def test_bad_samples_name_the_round() -> None:
    from fusebench.errors import FusebenchError

    with pytest.raises(FusebenchError, match="round 2 of 2: expected at least one sample, all positive"):
        decide([[1.0], [0.0]], [[1.0], [1.0]])
    with pytest.raises(FusebenchError, match="replicates 10: expected at least 100"):
        DecisionSettings(replicates=10)
