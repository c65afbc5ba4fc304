"""When a comparison looks at its samples, and how much of alpha each look may spend.

After the planned rounds (look 0), the rows still `noisy` whose decision says more rounds could
decide them get follow-up rounds, in batches, up to a cap (`--max-rounds`); each batch ends in one
more look. Looking more than once is a chance more to be wrong, so the looks share alpha:

- a noisy row goes on only while the rounds up to the cap would likely decide it
  (`LookSchedule.wants_more`: projected from its estimate and spread at the follow-up looks' alpha);
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
rule chooses which rows go on and however much the looks (which share their rounds) agree: the rule
may read the data (`wants_more` reads the estimate and spread so far), since a false verdict at
look k needs the look-k interval to miss, an event of probability at most alpha_k whether or not
the row was chosen; choosing only decides which of those events are looked at. That
is Bonferroni's bound, conservative: a group-sequential boundary that models the looks'
correlation would spend less, but needs the statistics' joint distribution, which the bootstrap
over few rounds does not give. With no follow-ups (`--max-rounds` equal to `--rounds`) the one
look spends all of alpha: the plain decision.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fusebench.compare.decide import (
    MAX_ROUNDS,
    NOISY,
    Decision,
    DecisionSettings,
    decide,
    decide_chance,
    projected_rounds,
)
from fusebench.errors import check

FOLLOW_UP_SHARE = 0.2
# NOTE: a row gets follow-ups only while they would decide it with at least this chance
# (`decide_chance` at the cap and the follow-up looks' alpha). At 0.5 it is the point projection
# ("the rounds needed are within the cap"), which, from the few planned rounds' noisy estimate of
# the spread, gives up on real slowdowns whose estimate came out low; lower, rows that only sit
# near the band's edge (revisions compared with themselves, mostly) get rounds that leave them noisy.
FOLLOW_UP_CHANCE = 0.3
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

    @property
    def follow_up_alpha(self) -> float:
        """The alpha every follow-up look decides at (the last look's; all of alpha without follow-ups)."""
        return self.alpha_at(len(self.looks) - 1)

    def wants_more(self, decision: Decision | None, look: int) -> bool:
        """Whether a row decided at look `look` gets the next batch: it is noisy, there is a later
        look, and the rounds up to the cap, projected from its estimate and spread so far, would
        decide it at the follow-up looks' alpha (not its own look's: a follow-up look decides at
        less) with a chance of at least FOLLOW_UP_CHANCE. A row they would most likely leave noisy
        is not measured again: its notes say how many rounds it would need (`rounds_advice`)."""
        if decision is None or decision.verdict != NOISY or look + 1 >= len(self.looks):
            return False
        return decide_chance(decision, self.follow_up_alpha, self.max_rounds) >= FOLLOW_UP_CHANCE

    def rounds_advice(self, decision: Decision) -> int | None:
        """For a noisy row: the smallest cap on rounds (`--max-rounds`) whose follow-up looks would,
        projected, decide it, each at the alpha that cap gives them; None: over MAX_ROUNDS."""
        for cap in range(decision.rounds + 1, MAX_ROUNDS + 1):
            needed = projected_rounds(decision, LookSchedule(self.rounds, cap, self.alpha).follow_up_alpha)
            if needed is not None and needed <= cap:
                return cap
        return None


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
