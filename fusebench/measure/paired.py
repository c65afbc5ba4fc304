"""Paired samples: our compiler and a peer timed alternately on one prepared case, for the verdict.

A machine's speed is not constant: a shared host's clocks, its neighbours and the cores it hands
out change over seconds. Each variant's own samples (`fusebench.measure.measure`) are taken in one
block, one variant after the other, so two blocks can land on two speeds: each tight (a small IQR)
and their ratio wrong by a third, with nothing in either measurement to say so. Samples taken
alternately see the same speeds: `fusebench` and each peer measured before it in the same process
(or after it: the later one pairs with the earlier) take turns sample by sample, in the order
A B B A A B ... so that a steady drift hits both alike, and the ratio of their medians is the
verdict `fusebench run` gives (`fusebench.report.summary`). The spread of the ratios of the
pairs (IQR / median) says how far to trust it.

A prepared case keeps a `Runner` for each variant measured ok on it (warm cases only: a cold
case's sample is a compilation); they go with the prepared case when the next (case, params)
begins. Each side is called twice untimed before its pairs: a peer prepared before another
variant reset Dynamo compiles again there, outside the timed samples. `fusebench run --no-paired`
(or `FUSEBENCH_PAIRED=0`, which `fusebench compare` sets: its verdict is between revisions) leaves
them out.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fusebench.cases.variants import OURS, is_ours
from fusebench.measure.noise import relative_spread
from fusebench.measure.stats import quantile
from fusebench.measure.timing import Timer

Clock = Callable[[], float]
WARMUP_CALLS = 2
PAIRED_ENV = "FUSEBENCH_PAIRED"  # "0": no paired samples (`fusebench compare`'s side runs set it)


@dataclass(frozen=True)
class Runner:
    """One variant's sample on a prepared case: `run` makes one sample's calls (the compiled
    function it closes over stays alive with it)."""

    variant: str
    run: Callable[[], Any]


@dataclass(frozen=True)
class Paired:
    """A variant against `other`, timed alternately: the ratio of their medians (per call), the
    spread of the pairs' ratios (IQR / median) and how many pairs."""

    other: str
    ratio: float
    spread: float | None
    pairs: int

    def to_json(self) -> dict[str, Any]:
        """As kept in an outcome's `extra["paired"]`, under the other variant's name."""
        return {"ratio": self.ratio, "spread": self.spread, "pairs": self.pairs}


def paired_wanted(no_paired: bool) -> bool:
    """Whether a run takes paired samples: unless `--no-paired` or `FUSEBENCH_PAIRED=0`."""
    return not no_paired and os.environ.get(PAIRED_ENV) != "0"


def may_pair(variant: str) -> bool:
    """Whether `variant` is paired with some other: it is `fusebench` or a peer (not ours)."""
    return variant == OURS or not is_ours(variant)


def pairs_with(variant: str, other: str) -> bool:
    """Whether a verdict needs these two timed alternately: one is `fusebench`, the other a peer."""
    return (variant == OURS and not is_ours(other)) or (other == OURS and not is_ours(variant))


def time_paired(
    this: Runner,
    other: Runner,
    before_each: Callable[[], None],
    timer: Timer,
    clock: Clock,
    budget_s: float,
    min_pairs: int,
    max_pairs: int,
) -> Paired:
    """Times `this` and `other` alternately (A B B A ...; `before_each` untimed before every sample)
    until `budget_s` is spent and `min_pairs` pairs exist, or `max_pairs` do: `this` over `other`."""
    for runner in (this, other):
        for _ in range(WARMUP_CALLS):
            before_each()
            runner.run()
    mine: list[float] = []
    theirs: list[float] = []
    start = clock()
    while len(mine) < max_pairs:
        order = ((this, mine), (other, theirs)) if len(mine) % 2 == 0 else ((other, theirs), (this, mine))
        for runner, samples in order:
            before_each()
            samples.append(timer.time(runner.run))
        if len(mine) >= min_pairs and clock() - start >= budget_s:
            break
    ratios = sorted(a / b for a, b in zip(mine, theirs) if b > 0)
    spread = None
    if len(ratios) >= 4:
        spread = relative_spread(quantile(ratios, 0.5), quantile(ratios, 0.25), quantile(ratios, 0.75))
    theirs_median = statistics.median(theirs)
    ratio = statistics.median(mine) / theirs_median if theirs_median > 0 else float("nan")
    return Paired(other.variant, ratio, spread, len(mine))
