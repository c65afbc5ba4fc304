"""The hierarchical bootstrap of a side's time: resample rounds, then samples within each round.

A side's time is its `center`: the mean over rounds of the log of each round's statistic (a
quantile of its samples: `DecisionSettings.quantile`, the lower quartile by default, 0.5 for the
median). One bootstrap replicate picks as many rounds as were measured, with replacement, and for
each pick draws a fresh resample of that round's samples and takes its statistic. The replicates'
spread is then what the estimate would spread over if the whole measurement (processes and the
samples inside them) were repeated.

Resampling the samples of a round only to take one quantile would cost (replicates x samples)
per round; instead the quantile of a resample is drawn directly from its exact distribution over
the round's order statistics: the k-th smallest of a resample is at most the j-th smallest sample
exactly when at least k of the n draws land on the j smallest, a binomial count
(`_order_statistic_cdf`, the binomial by its normal approximation; below `_EXACT_BELOW` samples
the resamples are drawn outright instead). So a replicate costs one `searchsorted` per round and
pick, and thousands of replicates of a benchmark take milliseconds.

Two sides measured in rounds that ran side by side (round r of A next to round r of B) are
resampled *paired*: one draw of round indices for both, so a drift of the machine that slowed
both sides in that round cancels out of their ratio.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from fusebench.errors import check

Rounds = Sequence[Sequence[float]]
_EXACT_BELOW = 64


def log_round_statistics(rounds: Rounds, quantile: float = 0.5) -> np.ndarray:
    """The log of each round's `quantile` (rounds of positive samples, at least one sample each)."""
    check(len(rounds) > 0, lambda: "no rounds to estimate a time from")
    values = []
    for index, samples in enumerate(rounds):
        ordered = np.asarray(samples, dtype=float)
        check(
            ordered.size > 0 and bool(np.all(ordered > 0)) and bool(np.all(np.isfinite(ordered))),
            lambda index=index: (
                f"round {index + 1} of {len(rounds)}: expected at least one sample, all positive and finite"
            ),
        )
        values.append(np.quantile(ordered, quantile))
    return np.log(np.asarray(values))


def replicate_log_centers(
    rounds: Rounds, picks: np.ndarray, rng: np.random.Generator, quantile: float = 0.5
) -> np.ndarray:
    """One bootstrap replicate of the side's log center per row of `picks` (replicates x rounds: the
    round index each slot resamples)."""
    replicates, slots = picks.shape
    logs = np.empty((replicates, slots))
    for index, samples in enumerate(rounds):
        chosen = picks == index
        count = int(chosen.sum())
        if count:
            ordered = np.sort(np.asarray(samples, dtype=float))
            logs[chosen] = np.log(resampled_quantiles(ordered, count, rng, quantile))
    return logs.mean(axis=1)


def round_picks(rounds: int, replicates: int, rng: np.random.Generator) -> np.ndarray:
    """Which round each slot of each replicate resamples: `rounds` picks with replacement per replicate."""
    return rng.integers(0, rounds, size=(replicates, rounds))


def resampled_quantiles(ordered: np.ndarray, count: int, rng: np.random.Generator, quantile: float) -> np.ndarray:
    """`count` draws of the `quantile` of a resample (with replacement, same size) of the sorted
    samples `ordered`, interpolated between order statistics as `np.quantile` does."""
    n = ordered.size
    if n < _EXACT_BELOW:
        return np.quantile(ordered[rng.integers(0, n, size=(count, n))], quantile, axis=1)
    position = quantile * (n - 1)
    rank, fraction = math.floor(position) + 1, position - math.floor(position)
    lower = np.minimum(np.searchsorted(_order_statistic_cdf(n, rank), rng.random(count), side="left"), n - 1)
    if fraction == 0:
        return ordered[lower]
    # NOTE: the next order statistic of the resample is, but for a repeated draw, the next sample.
    return ordered[lower] + fraction * (ordered[np.minimum(lower + 1, n - 1)] - ordered[lower])


def _order_statistic_cdf(n: int, rank: int) -> np.ndarray:
    """P(the rank-th smallest of a resample of n values <= the j-th smallest), j = 1..n: the chance
    that a Binomial(n, j / n) count reaches `rank`, by the normal approximation (n >= 64)."""
    p = np.arange(1, n + 1) / n
    spread = np.sqrt(np.maximum(n * p * (1 - p), 1e-12))
    return _normal_cdf((n * p - (rank - 0.5)) / spread)


def _normal_cdf(z: np.ndarray) -> np.ndarray:
    """The standard normal CDF, vectorised (Abramowitz and Stegun 7.1.26, absolute error < 1.5e-7)."""
    x = np.abs(z) / np.sqrt(2.0)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    erf = 1.0 - poly * np.exp(-x * x)
    return 0.5 * (1.0 + np.sign(z) * erf)
