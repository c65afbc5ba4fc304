"""Follow-up looks keep the false-positive rate at alpha and find more real slowdowns: simulated on
synthetic samples (known effect, known noise, fixed seeds), with the rule `fusebench compare` uses
(`fusebench.compare.looks`).

A benchmark is simulated as rounds run side by side: each round a drift common to both sides
(log-normal, sd `common`), each side's own drift (sd `drift`) and samples with their own noise
(sd `noise`); `more(count)` measures that many more rounds the same way, as a follow-up batch would.
"""

from __future__ import annotations

import numpy as np
import pytest

from fusebench.compare.decide import DecisionSettings
from fusebench.compare.looks import LookSchedule, decide_sequentially

FLAGS = ("slower", "faster")


def _rounds(rng: np.random.Generator, effect: float, count: int, drift: float, noise: float, common: float, n: int):
    a, b = [], []
    for _ in range(count):
        shared = rng.lognormal(0, common)
        a.append(list(shared * rng.lognormal(0, drift) * rng.lognormal(0, noise, n)))
        b.append(list(shared * effect * rng.lognormal(0, drift) * rng.lognormal(0, noise, n)))
    return a, b


def _verdicts(
    effect: float,
    schedule: LookSchedule,
    settings: DecisionSettings,
    seeds: int,
    drift: float = 0.15,
    noise: float = 0.3,
    common: float = 0.1,
    n: int = 24,
) -> list[tuple[str, int]]:
    """(verdict, last look) of `seeds` simulated benchmarks, each decided with follow-ups."""
    out = []
    for seed in range(seeds):
        rng = np.random.default_rng(seed)

        def more(count: int, rng: np.random.Generator = rng) -> tuple[list, list]:
            return _rounds(rng, effect, count, drift, noise, common, n)

        decision, look = decide_sequentially(*more(schedule.rounds), more, schedule, settings)
        out.append((decision.verdict, look))
    return out


def test_the_looks_double_the_rounds_up_to_the_cap_and_their_alphas_add_up_to_alpha() -> None:
    assert LookSchedule(6, 24, 0.01).looks == (6, 12, 24)
    assert LookSchedule(6, 18, 0.01).looks == (6, 12, 18)
    assert LookSchedule(4, 4, 0.01).looks == (4,)
    schedule = LookSchedule(6, 24, 0.01)
    alphas = [schedule.alpha_at(look) for look in range(len(schedule.looks))]
    assert sum(alphas) == pytest.approx(0.01) and alphas[0] > alphas[1] == alphas[2]
    assert schedule.batch(1) == (6, 6) and schedule.batch(2) == (12, 12)
    assert LookSchedule(6, 6, 0.01).alpha_at(0) == 0.01  # no follow-ups: the plain decision


@pytest.mark.slow
def test_a_revision_compared_with_itself_is_flagged_at_most_at_alpha_despite_the_looks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The worst case for looking more than once: no minimum effect (every interval that excludes 1
    is a flag) and every undecided row going on to the next look (the bound holds whatever rule
    picks the rows that go on). Sharing alpha keeps the flags of many A/A comparisons at alpha;
    deciding every look at the full alpha does not."""
    monkeypatch.setattr(LookSchedule, "wants_more", lambda self, decision, look: _undecided(self, decision, look))
    alpha, seeds = 0.2, 150
    schedule, settings = LookSchedule(6, 24, alpha), DecisionSettings(min_effect=0.0, alpha=alpha, replicates=200)
    shared = _verdicts(1.0, schedule, settings, seeds, n=16)
    assert sum(look == 2 for _, look in shared) > seeds / 2  # most were looked at three times
    assert sum(verdict in FLAGS for verdict, _ in shared) <= alpha * seeds
    monkeypatch.setattr(LookSchedule, "alpha_at", lambda self, look: self.alpha)
    every_look_at_alpha = _verdicts(1.0, schedule, settings, seeds, n=16)
    assert sum(verdict in FLAGS for verdict, _ in every_look_at_alpha) > alpha * seeds


def test_choosing_the_rows_that_go_on_from_their_data_keeps_the_flags_at_alpha() -> None:
    """The rule `fusebench compare` uses picks rows by their estimate and spread; with no minimum
    effect it picks just the A/A rows that look nearly significant, the worst data-driven choice.
    Their flags still stay within alpha: each look's interval misses at most at its own alpha,
    whichever rows are looked at."""
    alpha, seeds = 0.2, 150
    schedule, settings = LookSchedule(6, 24, alpha), DecisionSettings(min_effect=0.0, alpha=alpha, replicates=200)
    verdicts = _verdicts(1.0, schedule, settings, seeds, n=16)
    assert sum(look > 0 for _, look in verdicts) > seeds / 10  # the rule did choose rows to go on
    assert sum(verdict in FLAGS for verdict, _ in verdicts) <= alpha * seeds


def test_with_the_default_rule_a_revision_compared_with_itself_is_never_flagged() -> None:
    schedule, settings = LookSchedule(6, 24, 0.01), DecisionSettings(replicates=400)
    verdicts = _verdicts(1.0, schedule, settings, 40)
    assert not [verdict for verdict, _ in verdicts if verdict in FLAGS]


def test_rows_the_follow_ups_would_leave_noisy_get_none(monkeypatch: pytest.MonkeyPatch) -> None:
    """Revisions compared with themselves, rounds drifting by 5% on each side and 10% together,
    samples by 10%: projecting at the follow-up looks' alpha (and asking for a fair chance to decide)
    spends far fewer follow-up rounds on them than projecting at the planned look's own alpha did,
    and leaves none of them flagged."""
    schedule, settings = LookSchedule(6, 24, 0.01), DecisionSettings(replicates=300)
    noise = {"drift": 0.05, "noise": 0.1, "common": 0.1}
    projected = _verdicts(1.0, schedule, settings, 150, **noise)
    monkeypatch.setattr(LookSchedule, "wants_more", _within_cap_at_own_alpha)
    at_own_alpha = _verdicts(1.0, schedule, settings, 150, **noise)
    spent, spent_before = (sum(schedule.looks[look] - 6 for _, look in v) for v in (projected, at_own_alpha))
    assert 2 * spent < spent_before, (spent, spent_before)
    assert not [verdict for verdict, _ in projected + at_own_alpha if verdict in FLAGS]


def test_follow_ups_find_a_slowdown_by_half_that_the_planned_rounds_leave_noisy() -> None:
    """Rounds drifting by 15% on each side and 10% together, samples by 30%: six rounds leave most
    trials noisy; the follow-ups decide nearly all of them, and all correctly."""
    settings = DecisionSettings(replicates=400)
    planned = _verdicts(1.5, LookSchedule(6, 6, 0.01), settings, 40)
    followed = _verdicts(1.5, LookSchedule(6, 24, 0.01), settings, 40)
    assert sum(verdict == "slower" for verdict, _ in planned) < 20
    assert sum(verdict == "slower" for verdict, _ in followed) >= 38
    assert not [verdict for verdict, _ in followed if verdict in ("faster", "no change")]


def _within_cap_at_own_alpha(schedule: LookSchedule, decision: object, look: int) -> bool:
    """The rule before: the rounds needed at the alpha of the look that decided the row."""
    needed = getattr(decision, "rounds_needed", None)
    noisy = getattr(decision, "verdict", None) == "noisy"
    return noisy and look + 1 < len(schedule.looks) and needed is not None and needed <= schedule.max_rounds


def _undecided(schedule: LookSchedule, decision: object, look: int) -> bool:
    return getattr(decision, "verdict", None) == "noisy" and look + 1 < len(schedule.looks)


def test_the_chance_to_decide_grows_with_the_rounds_and_the_advice_names_a_cap_that_would() -> None:
    from fusebench.compare.decide import Decision, decide_chance, projected_rounds

    # B/A 1.15 with the standard error of a log ratio 0.06 after 6 paired rounds: noisy at 99%
    noisy = Decision(1.15, 0.98, 1.35, 0.04, "noisy", rounds=6, paired=True, log_variance=0.06**2, min_effect=0.05)
    chances = [decide_chance(noisy, 0.001, rounds) for rounds in (6, 12, 24, 48)]
    assert chances[0] == 0.0 and chances == sorted(chances) and chances[-1] > 0.5
    schedule = LookSchedule(6, 24, 0.01)
    cap = schedule.rounds_advice(noisy)
    assert cap is not None and 6 < cap <= 100
    assert projected_rounds(noisy, LookSchedule(6, cap, 0.01).follow_up_alpha) <= cap
    assert projected_rounds(noisy, LookSchedule(6, cap - 1, 0.01).follow_up_alpha) > cap - 1
    assert schedule.wants_more(noisy, 0) == (decide_chance(noisy, schedule.follow_up_alpha, 24) >= 0.3)
    # a ratio right at the band's edge: no number of rounds decides it
    edge = Decision(1.05, 0.95, 1.16, 0.3, "noisy", rounds=6, paired=True, log_variance=0.02**2, min_effect=0.05)
    assert schedule.rounds_advice(edge) is None and not schedule.wants_more(edge, 0)
    assert decide_chance(Decision(1.5, 1.4, 1.6, 0.0, "slower", rounds=6), 0.001, 24) == 1.0
