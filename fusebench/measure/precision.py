"""When the median is known well enough: the stopping rule of a measurement's timed repeats.

A fixed time budget spends as long on a GPU kernel whose samples agree to a fraction of a percent
as on a noisy host-bound call. Instead, `PrecisionStop` ends the repeats once the distribution-free
confidence interval of the median (order statistics: the ranks a Binomial(n, 1/2) count puts
around the middle, exact for any continuous distribution of independent samples) is narrower
than `relative` of the median on either side; the budget stays the cap. It is checked after
`min_repeats` samples, then each time the count has grown by a tenth, so that the sorting it
costs stays proportional to the samples taken.

It bounds the error of one run's median. `fusebench compare` judges differences between runs and
needs every round to spend its whole budget (its verdicts' error rates were measured that way:
docs/verdicts.md), so it turns the rule off (`PRECISION_ENV`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

from fusebench.errors import check

DEFAULT_PRECISION = 0.01
DEFAULT_CONFIDENCE = 0.95
# NOTE: 6 samples are the fewest whose extreme order statistics cover the median with 95%
# confidence; 10 keep a stray first sample from ending the repeats on its own.
PRECISION_MIN_REPEATS = 10
PRECISION_ENV = "FUSEBENCH_PRECISION"
CHECK_GROWTH = 1.1


def median_interval(
    sorted_samples: Sequence[float], confidence: float = DEFAULT_CONFIDENCE
) -> tuple[float, float] | None:
    """The order-statistic interval [x_(k), x_(n+1-k)] (1-based ranks) holding the median with at
    least `confidence`, for the largest such k; None when even [min, max] falls short (too few samples)."""
    check(0 < confidence < 1, lambda: f"confidence {confidence} is outside (0, 1)")
    count = len(sorted_samples)
    rank = lower_rank(count, confidence)
    if rank is None:
        return None
    return sorted_samples[rank - 1], sorted_samples[count - rank]


def lower_rank(count: int, confidence: float) -> int | None:
    """The largest k with P(Binomial(count, 1/2) <= k - 1) <= (1 - confidence) / 2, or None."""
    tail = (1 - confidence) / 2
    log_half = count * math.log(0.5)
    # NOTE: the counts more than eight standard deviations (sqrt(count) / 2 each) below the middle
    # hold less than 1e-15 of the mass: starting there keeps a check O(sqrt(count)), not O(count)
    first = max(0, math.floor(count / 2 - 4 * math.sqrt(count)))
    cumulative, rank = 0.0, first or None
    for successes in range(first, count // 2 + 1):
        cumulative += math.exp(
            math.lgamma(count + 1) - math.lgamma(successes + 1) - math.lgamma(count - successes + 1) + log_half
        )
        if cumulative > tail:
            break
        rank = successes + 1
    return rank


def relative_half_width(samples: Sequence[float], confidence: float = DEFAULT_CONFIDENCE) -> float | None:
    """Half the width of the median's interval over the median, or None when there is no interval
    yet (too few samples) or the median is not positive."""
    ordered = sorted(samples)
    interval = median_interval(ordered, confidence)
    if interval is None:
        return None
    count = len(ordered)
    median = (ordered[(count - 1) // 2] + ordered[count // 2]) / 2
    if median <= 0:
        return None
    return (interval[1] - interval[0]) / 2 / median


@dataclass
class PrecisionStop:
    """Says when the samples so far pin their median down to `relative` (a fraction) of it."""

    relative: float = DEFAULT_PRECISION
    confidence: float = DEFAULT_CONFIDENCE
    min_repeats: int = PRECISION_MIN_REPEATS
    next_check: int = 0

    def __call__(self, samples: Sequence[float]) -> bool:
        """True when the repeats can stop (checked at `min_repeats`, then every growth by a tenth)."""
        count = len(samples)
        if count < max(self.min_repeats, self.next_check):
            return False
        self.next_check = max(count + 1, math.ceil(count * CHECK_GROWTH))
        width = relative_half_width(samples, self.confidence)
        return width is not None and width <= self.relative


def checked_precision(precision: float | None) -> float:
    """The precision a run stops at: `precision` (a fraction from 0 to 1; 0 = the whole budget)
    or, unset, $FUSEBENCH_PRECISION when it parses, else `DEFAULT_PRECISION`."""
    if precision is None:
        try:
            precision = float(os.environ.get(PRECISION_ENV, ""))
        except ValueError:
            return DEFAULT_PRECISION
        return precision if 0 <= precision < 1 else DEFAULT_PRECISION
    check(
        0 <= precision < 1,
        lambda: f"--precision {precision:g}: expected a fraction from 0 (spend the whole budget) to below 1, like 0.01",
    )
    return precision
