"""When a comparison looks at its samples, and how much of alpha each look may spend.

After the planned rounds (look 0), the rows still `noisy` whose decision says more rounds could
decide them get follow-up rounds, in batches, up to a cap (`--max-rounds`); each batch ends in one
more look. Looking more than once is a chance more to be wrong, so the looks share alpha:

- the looks happen at round counts fixed before anything is measured (`LookSchedule.looks`): the
  planned rounds, then each batch doubles the rounds so far, the last one stopping at the cap
  (6, 12, 18 for 6 rounds and a cap of 18). Doubling keeps the number of looks, and so the
  alpha each must give up, small, while every look has twice the rounds of the one before;
- look 0 decides at (1 - FOLLOW_UP_SHARE) * alpha, and every later look at an equal part of the
  other FOLLOW_UP_SHARE * alpha. Most rows are decided by the planned rounds, where the t quantile
  of few degrees of freedom makes each bit of alpha given up cost much width; later looks have
  more rounds, where a smaller alpha costs little.

NOTE: why this bounds the false-positive rate. A false verdict (slower or faster while the true
ratio lies within the minimum effect) after any number of looks is a false verdict at one of the
looks made, and look k, a calibrated interval at a round count fixed in advance, is wrong with
probability at most its alpha. The union is at most the sum of the looks' alphas, alpha, whatever
rule chooses which rows go on and however much the looks (which share their rounds) agree. That
is Bonferroni's bound, conservative: a group-sequential boundary that models the looks'
correlation would spend less, but needs the statistics' joint distribution, which the bootstrap
over few rounds does not give. With no follow-ups (`--max-rounds` equal to `--rounds`) the one
look spends all of alpha: the plain decision.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fusebench.compare.decide import NOISY, Decision, DecisionSettings, decide
from fusebench.errors import check

FOLLOW_UP_SHARE = 0.2
Rounds = Sequence[Sequence[float]]
MoreRounds = Callable[[int], tuple[Rounds, Rounds]]


@dataclass(frozen=True)
class LookSchedule:
    """The planned rounds, the cap on rounds with follow-ups, and the overall alpha to share."""

    rounds: int
    max_rounds: int
    alpha: float

    def __post_init__(self) -> None:
        check(self.rounds >= 1, lambda: f"rounds {self.rounds}: expected at least 1")
        check(0 < self.alpha < 1, lambda: f"alpha {self.alpha}: expected a probability between 0 and 1")

    @property
    def looks(self) -> tuple[int, ...]:
        """The round count at each look: the planned rounds, then doubling up to the cap."""
        counts = [self.rounds]
        while counts[-1] < self.max_rounds:
            counts.append(min(2 * counts[-1], self.max_rounds))
        return tuple(counts)

    @property
    def follow_ups(self) -> int:
        """How many follow-up batches (looks after the planned rounds) there can be."""
        return len(self.looks) - 1

    def alpha_at(self, look: int) -> float:
        """The alpha look `look` decides at (0: the planned rounds); the looks' alphas add to alpha."""
        check(0 <= look < len(self.looks), lambda: f"look {look}: expected 0 to {len(self.looks) - 1}")
        if not self.follow_ups:
            return self.alpha
        if look == 0:
            return self.alpha * (1 - FOLLOW_UP_SHARE)
        return self.alpha * FOLLOW_UP_SHARE / self.follow_ups

    def settings_at(self, look: int, settings: DecisionSettings) -> DecisionSettings:
        """`settings` with the alpha of look `look`."""
        return dataclasses.replace(settings, alpha=self.alpha_at(look))

    def batch(self, look: int) -> tuple[int, int]:
        """The rounds follow-up look `look` (from 1) adds: (first round index, count)."""
        return self.looks[look - 1], self.looks[look] - self.looks[look - 1]

    def wants_more(self, decision: Decision | None, look: int) -> bool:
        """Whether a row decided at look `look` gets the next batch: it is noisy, there is a later
        look, and its interval, projected, would decide within the cap."""
        return (
            decision is not None
            and decision.verdict == NOISY
            and look + 1 < len(self.looks)
            and decision.rounds_needed is not None
            and decision.rounds_needed <= self.max_rounds
        )


def decide_sequentially(
    a: Rounds, b: Rounds, more: MoreRounds, schedule: LookSchedule, settings: DecisionSettings | None = None
) -> tuple[Decision, int]:
    """The decision of one benchmark with follow-ups: its planned rounds `a` and `b` decided at look
    0, then while `schedule` wants more, `more(count)` measures that many more rounds of each side
    (returns them as (rounds of A, rounds of B)) and the look after decides on all of them. Returns
    the last decision and its look (0: no follow-up). `fusebench compare` runs the same rule over
    every row at once (`fusebench.compare.followup`); this one-row form is what simulations use."""
    settings = settings or DecisionSettings(alpha=schedule.alpha)
    a, b = list(a), list(b)
    look = 0
    decision = decide(a, b, schedule.settings_at(look, settings))
    while schedule.wants_more(decision, look):
        look += 1
        _, count = schedule.batch(look)
        new_a, new_b = more(count)
        a, b = a + list(new_a), b + list(new_b)
        decision = decide(a, b, schedule.settings_at(look, settings))
    return decision, look
