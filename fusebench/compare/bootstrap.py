"""The hierarchical bootstrap of a side's time: resample rounds, then samples within each round.

A side's time is its `center`: the mean over rounds of the log of each round's median. One
bootstrap replicate picks as many rounds as were measured, with replacement, and for each pick
draws a fresh resample of that round's samples and takes its median. The replicates' spread is
then what the estimate would spread over if the whole measurement (processes and the samples
inside them) were repeated.

Resampling the samples of a round only to take their median would cost (replicates x samples)
per round; instead the median of a resample is drawn directly from its exact distribution over
the round's order statistics: the resample's lower median is at most the j-th smallest sample
exactly when at least (n + 1) // 2 of the n draws land on the j smallest, a binomial count
(`_median_cdf`, the binomial by its normal approximation; below `_EXACT_BELOW` samples the
resamples are drawn outright instead). So a replicate costs one `searchsorted` per round and pick,
and thousands of replicates of a benchmark take milliseconds.

Two sides measured in rounds that ran side by side (round r of A next to round r of B) are
resampled *paired*: one draw of round indices for both, so a drift of the machine that slowed
both sides in that round cancels out of their ratio.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fusebench.errors import check

Rounds = Sequence[Sequence[float]]
_EXACT_BELOW = 64


def log_round_medians(rounds: Rounds) -> np.ndarray:
    """The log of each round's median (rounds of positive samples, at least one sample each)."""
    check(len(rounds) > 0, lambda: "no rounds to estimate a time from")
    medians = []
    for index, samples in enumerate(rounds):
        values = np.asarray(samples, dtype=float)
        check(
            values.size > 0 and bool(np.all(values > 0)) and bool(np.all(np.isfinite(values))),
            lambda index=index: (
                f"round {index + 1} of {len(rounds)}: expected at least one sample, all positive and finite"
            ),
        )
        medians.append(np.median(values))
    return np.log(np.asarray(medians))


def replicate_log_centers(rounds: Rounds, picks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One bootstrap replicate of the side's log center per row of `picks` (replicates x rounds: the
    round index each slot resamples)."""
    replicates, slots = picks.shape
    log_medians = np.empty((replicates, slots))
    for index, samples in enumerate(rounds):
        chosen = picks == index
        count = int(chosen.sum())
        if count:
            log_medians[chosen] = np.log(_resampled_medians(np.sort(np.asarray(samples, dtype=float)), count, rng))
    return log_medians.mean(axis=1)


def round_picks(rounds: int, replicates: int, rng: np.random.Generator) -> np.ndarray:
    """Which round each slot of each replicate resamples: `rounds` picks with replacement per replicate."""
    return rng.integers(0, rounds, size=(replicates, rounds))


def _resampled_medians(ordered: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` medians of resamples (with replacement, same size) of the sorted samples `ordered`."""
    n = ordered.size
    if n < _EXACT_BELOW:
        return np.median(ordered[rng.integers(0, n, size=(count, n))], axis=1)
    positions = np.minimum(np.searchsorted(_median_cdf(n), rng.random(count), side="left"), n - 1)
    if n % 2:
        return ordered[positions]
    # NOTE: an even resample's median is the mean of its two middle values; the one above the lower
    # median is, but for a repeated draw, the next sample in order.
    return (ordered[positions] + ordered[np.minimum(positions + 1, n - 1)]) / 2


def _median_cdf(n: int) -> np.ndarray:
    """P(the lower median of a resample of n values <= the j-th smallest), j = 1..n: the chance that
    a Binomial(n, j / n) count reaches (n + 1) // 2, by the normal approximation (n >= 64)."""
    needed = (n + 1) // 2
    p = np.arange(1, n + 1) / n
    spread = np.sqrt(np.maximum(n * p * (1 - p), 1e-12))
    z = (n * p - (needed - 0.5)) / spread
    return _normal_cdf(z)


def _normal_cdf(z: np.ndarray) -> np.ndarray:
    """The standard normal CDF, vectorised (Abramowitz and Stegun 7.1.26, absolute error < 1.5e-7)."""
    x = np.abs(z) / np.sqrt(2.0)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    erf = 1.0 - poly * np.exp(-x * x)
    return 0.5 * (1.0 + np.sign(z) * erf)
