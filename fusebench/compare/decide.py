"""Deciding whether B is faster or slower than A from timing samples grouped in rounds.

The unit of replication is the round (one `fusebench run` process), not the sample. Samples of one
process share its state (clock boost, memory placement, what the neighbours did meanwhile), so they
are not independent draws of "the time of this revision": pooling them as if they were gives
p-values near 0 for a revision compared with itself, and then only the minimum effect decides.

So each round is summarized by its median, and a side by the geometric mean of its round medians
(its `center`). The decision is Welch's t-test on the logs of the round medians: the textbook
analysis of nested data through cluster summaries, exact for a random-effects model of log times
(a round's offset plus its samples' noise, both folded into the round median's spread), and it
needs no assumption that the two sides' spreads agree. A side measured in one round has no
between-round spread to estimate; its variance is then the within-round variance of the median
(from the order statistics that bracket it), which sees only that process's noise.

NOTE: why not a hierarchical bootstrap (resample rounds, then samples within rounds)? With the 2 to
5 rounds a comparison can afford, resampling rounds underestimates their spread and makes it
discrete: on simulated A/A data with 2% round-to-round drift it called 23% (2 rounds), 14% (3) and
5% (5 rounds) of benchmarks significant at alpha = 0.01. The t distribution's heavy tails for few
rounds are exactly the missing caution.

Two tests must agree before a change is reported:
- significance: the two-sided p-value is below `alpha`;
- a minimum effect: the ratio of centers B / A is at least 1 + `min_effect` (slower) or at most
  1 / (1 + `min_effect`) (faster). A tiny but consistent difference is "no change".
The confidence interval of the ratio is the t interval of the log ratio, exponentiated.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fusebench.errors import check

FASTER, SLOWER, NO_CHANGE = "faster", "slower", "no change"
Rounds = Sequence[Sequence[float]]
_Z_95 = 1.959963984540054


@dataclass(frozen=True)
class DecisionSettings:
    """How sure and how large a change must be to be reported."""

    min_effect: float = 0.05
    alpha: float = 0.01
    confidence: float = 0.95

    def __post_init__(self) -> None:
        check(self.min_effect >= 0, lambda: f"minimum effect {self.min_effect}: expected a fraction >= 0, like 0.05")
        check(0 < self.alpha < 1, lambda: f"alpha {self.alpha}: expected a probability between 0 and 1, like 0.01")
        check(0 < self.confidence < 1, lambda: f"confidence {self.confidence}: expected a level like 0.95")


@dataclass(frozen=True)
class Decision:
    """B compared with A: ratio of centers (B / A, > 1 means B is slower), its CI, p-value, verdict."""

    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    verdict: str


@dataclass(frozen=True)
class SideEstimate:
    """A side's log center, the variance of that estimate and its degrees of freedom (inf: normal)."""

    log_center: float
    variance: float
    dof: float


def center(rounds: Rounds) -> float:
    """A side's time: the geometric mean of its rounds' medians (seconds)."""
    return math.exp(estimate(rounds).log_center)


def estimate(rounds: Rounds) -> SideEstimate:
    """The log center of `rounds` (one list of positive samples per round) and its uncertainty."""
    check(len(rounds) > 0, lambda: "no rounds to estimate a time from")
    ordered = [np.sort(np.asarray(r, dtype=float)) for r in rounds]
    check(
        all(len(r) > 0 and r[0] > 0 for r in ordered),
        lambda: f"each of the {len(rounds)} rounds needs at least one positive sample",
    )
    logs = np.log([np.median(r) for r in ordered])
    if len(logs) >= 2:
        return SideEstimate(float(logs.mean()), float(logs.var(ddof=1)) / len(logs), len(logs) - 1.0)
    samples = ordered[0]
    n = len(samples)
    half_width = _Z_95 * math.sqrt(n) / 2
    low = samples[max(0, math.floor((n - 1) / 2 - half_width))]
    high = samples[min(n - 1, math.ceil((n - 1) / 2 + half_width))]
    return SideEstimate(float(logs[0]), (math.log(high / low) / (2 * _Z_95)) ** 2, math.inf)


def decide(a: Rounds, b: Rounds, settings: DecisionSettings | None = None) -> Decision:
    """Compares B's timing samples with A's (seconds; one list per round, at least one sample each)."""
    settings = settings or DecisionSettings()
    side_a, side_b = estimate(a), estimate(b)
    log_ratio = side_b.log_center - side_a.log_center
    variance = side_a.variance + side_b.variance
    dof = _welch_dof(side_a, side_b)
    if variance == 0:
        p_value, half_width = (1.0 if log_ratio == 0 else 0.0), 0.0
    else:
        p_value = t_two_sided_p(log_ratio / math.sqrt(variance), dof)
        half_width = t_quantile(1 - (1 - settings.confidence) / 2, dof) * math.sqrt(variance)
    ratio = math.exp(log_ratio)
    significant = p_value < settings.alpha
    if significant and ratio >= 1 + settings.min_effect:
        verdict = SLOWER
    elif significant and ratio <= 1 / (1 + settings.min_effect):
        verdict = FASTER
    else:
        verdict = NO_CHANGE
    return Decision(ratio, math.exp(log_ratio - half_width), math.exp(log_ratio + half_width), p_value, verdict)


def t_two_sided_p(t: float, dof: float) -> float:
    """P(|T| >= |t|) for Student's t with `dof` degrees of freedom (inf: the normal distribution)."""
    if math.isinf(dof):
        return math.erfc(abs(t) / math.sqrt(2))
    return _incomplete_beta(dof / (dof + t * t), dof / 2, 0.5)


def t_quantile(level: float, dof: float) -> float:
    """The `level` quantile (0.5 < level < 1) of Student's t, by bisection on `t_two_sided_p`."""
    low, high = 0.0, 1e6
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (middle, high) if t_two_sided_p(middle, dof) > 2 * (1 - level) else (low, middle)
    return (low + high) / 2


def _welch_dof(a: SideEstimate, b: SideEstimate) -> float:
    """Welch-Satterthwaite degrees of freedom of the difference of the two log centers."""
    terms = [(s.variance**2 / s.dof) for s in (a, b) if not math.isinf(s.dof)]
    denominator = sum(terms)
    if denominator == 0:
        return math.inf
    return (a.variance + b.variance) ** 2 / denominator


def _incomplete_beta(x: float, a: float, b: float) -> float:
    """The regularized incomplete beta function I_x(a, b), by its continued fraction (Lentz's method)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    if x > (a + 1) / (a + b + 2):
        return 1.0 - _incomplete_beta(1 - x, b, a)
    log_front = a * math.log(x) + b * math.log1p(-x) - (math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b))
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    fraction = d
    for m in range(1, 500):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            fraction *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return math.exp(log_front) * fraction / a
