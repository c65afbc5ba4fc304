"""Deciding whether B is faster or slower than A from timing samples grouped in rounds.

A round is one `fusebench run` process of a side. Samples of one process share its state (clock
boost, memory placement, what the neighbours did meanwhile), so they are not independent draws of
"the time of this revision": pooled as if they were, a revision compared with itself reads as
significantly changed most of the time. Both levels of noise are in the estimate:

- a side's time is its `center`, the geometric mean over its rounds of each round's lower
  quartile (`DecisionSettings.quantile`; 0.5 for medians); the ratio B / A of the centers is the
  point estimate;
- its spread comes from a hierarchical bootstrap (`fusebench.compare.bootstrap`): resample the
  rounds, then the samples within each resampled round. Rounds that ran side by side (round r of A
  beside round r of B, which happens whenever both sides have the same number of rounds) are
  resampled as pairs, so a drift of the machine that hit both sides of a round cancels;
- the interval is the log ratio plus or minus Student's t quantile (at confidence 1 - alpha, with
  the rounds' degrees of freedom: rounds - 1 when paired, Welch-Satterthwaite otherwise) times the
  bootstrap's standard error scaled by rounds / (rounds - 1).

NOTE: why not the bootstrap's own percentiles? With the few rounds a comparison can afford, the
rounds' bootstrap sees only `rounds` distinct values and its plug-in variance is (rounds - 1) /
rounds of the unbiased one: percentile intervals from 2 to 5 rounds call a revision compared with
itself significant several times more often than alpha. The bootstrap is the right estimator of
the standard error (both levels, any sample distribution); the t quantile and the correction
restore the caution that few rounds need. One round per side shows no between-round spread at
all: its interval (normal quantile) sees only that process's noise.

NOTE: why the lower quartile rather than the median? Interference on a shared machine only adds
time: a sample during which the process waited for a core takes milliseconds longer. On a loaded
machine a round can hold a quarter to a half of such samples, and its median then jumps between
the code's time and the plateau, from round to round and inside the bootstrap alike, while the
lower quartile stays on the code's time. Unlike the minimum it is still the value of many
samples, not of one lucky one, so it does not drift with the number of samples taken.

Verdicts, with [low, high] the (1 - alpha) interval of B / A and m the minimum effect:
- slower: low > 1 + m (B is slower by more than m, with confidence 1 - alpha);
- faster: high < 1 / (1 + m);
- no change: 1 / (1 + m) <= low and high <= 1 + m (any change is smaller than m);
- noisy: anything else, the interval crosses 1 + m or 1 / (1 + m): too wide to decide.
  `Decision.rounds_needed` estimates how many rounds per side would decide it (the standard error
  shrinks as 1 / sqrt(rounds) and the t quantile with the degrees of freedom), or None when no
  number up to `MAX_ROUNDS` would: the change is about the size of m itself.
A noisy interval may still exclude 1 (`Decision.excludes_one`): a change, but perhaps below m.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fusebench.compare.bootstrap import log_round_statistics, replicate_log_centers, round_picks
from fusebench.errors import check

FASTER, SLOWER, NO_CHANGE, NOISY = "faster", "slower", "no change", "noisy"
MAX_ROUNDS = 100
Rounds = Sequence[Sequence[float]]


@dataclass(frozen=True)
class DecisionSettings:
    """How sure and how large a change must be to be reported, and the bootstrap's size and seed."""

    min_effect: float = 0.05
    alpha: float = 0.01
    quantile: float = 0.25
    replicates: int = 2000
    seed: int = 0

    def __post_init__(self) -> None:
        check(self.min_effect >= 0, lambda: f"minimum effect {self.min_effect}: expected a fraction >= 0, like 0.05")
        check(0 < self.alpha < 1, lambda: f"alpha {self.alpha}: expected a probability between 0 and 1, like 0.01")
        check(self.replicates >= 100, lambda: f"replicates {self.replicates}: expected at least 100")
        check(0 < self.quantile < 1, lambda: f"quantile {self.quantile}: expected a level between 0 and 1, like 0.25")

    @property
    def confidence(self) -> float:
        """The interval's confidence level, 1 - alpha."""
        return 1 - self.alpha


@dataclass(frozen=True)
class Decision:
    """B compared with A: ratio of centers (B / A, > 1 means B is slower), its (1 - alpha) interval,
    p-value (of 'no change at all'), verdict, rounds per side, whether rounds were paired, for a
    noisy verdict the rounds per side estimated to decide (None: no number up to MAX_ROUNDS), and
    the interval's confidence level, and each side's time (its center, seconds)."""

    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    verdict: str
    rounds: int = 0
    paired: bool = False
    rounds_needed: int | None = None
    confidence: float = 0.99
    time_a: float = 0.0
    time_b: float = 0.0
    log_variance: float = 0.0
    min_effect: float = 0.05

    @property
    def excludes_one(self) -> bool:
        """Whether the interval excludes 1: B differs from A at all, whatever the verdict says."""
        return self.ci_low > 1 or self.ci_high < 1


def center(rounds: Rounds, quantile: float = 0.5) -> float:
    """A side's time: the geometric mean of its rounds' `quantile`s (seconds; medians by default)."""
    return math.exp(float(log_round_statistics(rounds, quantile).mean()))


def decide(a: Rounds, b: Rounds, settings: DecisionSettings | None = None) -> Decision:
    """Compares B's timing samples with A's (seconds; one list per round, in the order the rounds
    ran, at least one positive sample each)."""
    settings = settings or DecisionSettings()
    quantile = settings.quantile
    log_a, log_b = float(log_round_statistics(a, quantile).mean()), float(log_round_statistics(b, quantile).mean())
    log_ratio = log_b - log_a
    rng = np.random.default_rng(settings.seed)
    paired = len(a) == len(b)
    if paired:
        picks = round_picks(len(a), settings.replicates, rng)
        spread = replicate_log_centers(b, picks, rng, quantile) - replicate_log_centers(a, picks, rng, quantile)
        variance = float(spread.var(ddof=1)) * _small_sample_correction(len(a))
        dof = len(a) - 1.0 if len(a) > 1 else math.inf
    else:
        variance_a, variance_b = (_side_variance(side, settings, rng) for side in (a, b))
        variance = variance_a + variance_b
        dof = _welch_dof((variance_a, len(a)), (variance_b, len(b)))
    if variance == 0:
        p_value, half_width = (1.0 if log_ratio == 0 else 0.0), 0.0
    else:
        p_value = t_two_sided_p(log_ratio / math.sqrt(variance), dof)
        half_width = t_quantile(1 - settings.alpha / 2, dof) * math.sqrt(variance)
    verdict = _verdict(log_ratio, half_width, settings.min_effect)
    needed = (
        _rounds_needed(log_ratio, variance, min(len(a), len(b)), paired, settings.min_effect, settings.alpha)
        if verdict == NOISY
        else None
    )
    return Decision(
        math.exp(log_ratio),
        math.exp(log_ratio - half_width),
        math.exp(log_ratio + half_width),
        p_value,
        verdict,
        rounds=min(len(a), len(b)),
        paired=paired,
        rounds_needed=needed,
        confidence=settings.confidence,
        time_a=math.exp(log_a),
        time_b=math.exp(log_b),
        log_variance=variance,
        min_effect=settings.min_effect,
    )


def projected_rounds(decision: Decision, alpha: float) -> int | None:
    """The fewest rounds per side whose interval at confidence 1 - `alpha` would decide `decision`'s
    row, projected from its spread as `Decision.rounds_needed` is (None: not even MAX_ROUNDS; its
    own rounds for a row that is not noisy). Follow-up looks decide at a smaller alpha than the
    planned rounds' look, so what they could decide is projected at theirs
    (`fusebench.compare.looks.LookSchedule.wants_more`)."""
    if decision.verdict != NOISY:
        return decision.rounds
    log_ratio = math.log(decision.ratio)
    return _rounds_needed(
        log_ratio, decision.log_variance, decision.rounds, decision.paired, decision.min_effect, alpha
    )


def _verdict(log_ratio: float, half_width: float, min_effect: float) -> str:
    """The verdict of the interval log_ratio +- half_width against the band +- log(1 + min_effect)."""
    band = math.log1p(min_effect)
    low, high = log_ratio - half_width, log_ratio + half_width
    if low > band:
        return SLOWER
    if high < -band:
        return FASTER
    if -band <= low and high <= band:
        return NO_CHANGE
    return NOISY


def decide_chance(decision: Decision, alpha: float, rounds: int) -> float:
    """The chance that `decision`'s row, measured to `rounds` rounds per side, is decided (slower,
    faster or no change) by an interval at confidence 1 - `alpha`, were its true log ratio the
    current estimate and each round's spread the current one: the rounds to come average with the
    ones measured, so the estimate then is normal around today's with the new rounds' share of the
    spread (a group-sequential design's conditional power). 1 for a row that is not noisy."""
    if decision.verdict != NOISY:
        return 1.0
    measured = max(decision.rounds, 1)
    if rounds <= measured:
        return 0.0
    per_round = decision.log_variance * measured
    dof = rounds - 1.0 if decision.paired else 2.0 * (rounds - 1)
    half_width = t_quantile(1 - alpha / 2, dof) * math.sqrt(per_round / rounds)
    band = math.log1p(decision.min_effect)
    center, spread = math.log(decision.ratio), math.sqrt((rounds - measured) * per_round) / rounds
    if spread == 0:
        return float(_verdict(center, half_width, decision.min_effect) != NOISY)

    def below(x: float) -> float:
        return 0.5 * math.erfc((center - x) / (spread * math.sqrt(2)))

    chance = (1 - below(band + half_width)) + below(-band - half_width)
    if half_width < band:
        chance += below(band - half_width) - below(-band + half_width)
    return chance


def _rounds_needed(
    log_ratio: float, variance: float, rounds: int, paired: bool, min_effect: float, alpha: float
) -> int | None:
    """The fewest rounds per side whose interval, as wide as this one scaled to that many rounds,
    lies on one side of every band edge; None when even MAX_ROUNDS would not do. Both levels of
    noise shrink alike: every round adds its own drift and its own samples, so the variance of the
    mean of the rounds' statistics, between-round and within-round parts together, is one over
    the rounds."""
    band = math.log1p(min_effect)
    gap = abs(abs(log_ratio) - band)
    if gap == 0:
        return None

    def decides(candidate: int) -> bool:
        dof = candidate - 1.0 if paired else 2.0 * (candidate - 1)
        return t_quantile(1 - alpha / 2, dof) * math.sqrt(variance * rounds / candidate) < gap

    low, high = rounds + 1, MAX_ROUNDS
    if not decides(high):
        return None
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if decides(middle) else (middle + 1, high)
    return low


def _side_variance(rounds: Rounds, settings: DecisionSettings, rng: np.random.Generator) -> float:
    """The bootstrap variance of one side's log center (rounds resampled on their own)."""
    picks = round_picks(len(rounds), settings.replicates, rng)
    centers = replicate_log_centers(rounds, picks, rng, settings.quantile)
    return float(centers.var(ddof=1)) * _small_sample_correction(len(rounds))


def _small_sample_correction(rounds: int) -> float:
    """rounds / (rounds - 1): the bootstrap's plug-in variance of a mean of `rounds` values is that
    much smaller than the unbiased one (1 for a single round, which has no between-round spread)."""
    return rounds / (rounds - 1) if rounds > 1 else 1.0


def _welch_dof(*sides: tuple[float, int]) -> float:
    """Welch-Satterthwaite degrees of freedom of a difference of two means of (variance, rounds); a
    side of one round counts as known exactly (its variance is within-round only)."""
    total = sum(variance for variance, _ in sides)
    denominator = sum(variance**2 / (rounds - 1) for variance, rounds in sides if rounds > 1)
    if denominator == 0 or total == 0:
        return math.inf
    return total**2 / denominator


def t_two_sided_p(t: float, dof: float) -> float:
    """P(|T| >= |t|) for Student's t with `dof` degrees of freedom (inf: the normal distribution)."""
    if math.isinf(dof):
        return math.erfc(abs(t) / math.sqrt(2))
    return _incomplete_beta(dof / (dof + t * t), dof / 2, 0.5)


@functools.lru_cache(maxsize=1024)
def t_quantile(level: float, dof: float) -> float:
    """The `level` quantile (0.5 < level < 1) of Student's t, by bisection on `t_two_sided_p`."""
    low, high = 0.0, 1e6
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (middle, high) if t_two_sided_p(middle, dof) > 2 * (1 - level) else (low, middle)
        if high - low < 1e-12 * max(1.0, low):
            break
    return (low + high) / 2


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
