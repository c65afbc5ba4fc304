"""Deciding whether B is faster or slower than A from timing samples.

Two tests must agree before a change is reported:
- statistical significance: the two-sided Mann-Whitney U test (rank-sum; no assumption about the
  shape of timing distributions, which are skewed and heavy-tailed) at level `alpha`, with the
  normal approximation corrected for ties and continuity (accurate from about 8 samples a side;
  fusebench compares hundreds);
- a minimum effect: the ratio of medians, B / A, is at least 1 + `min_effect` (slower) or at most
  1 / (1 + `min_effect`) (faster). A tiny but consistent difference is "no change": on a busy
  machine, every pair of processes differs a little.
The ratio's confidence interval is a percentile bootstrap (resampling each side's samples with
replacement, a fixed seed so a report is reproducible); it is reported, not used to decide.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fusebench.errors import check

FASTER, SLOWER, NO_CHANGE = "faster", "slower", "no change"
_BOOTSTRAP_CHUNK_ELEMENTS = 2_000_000


@dataclass(frozen=True)
class DecisionSettings:
    """How sure and how large a change must be to be reported."""

    min_effect: float = 0.05
    alpha: float = 0.01
    confidence: float = 0.95
    resamples: int = 1000
    seed: int = 0

    def __post_init__(self) -> None:
        check(self.min_effect >= 0, lambda: f"minimum effect {self.min_effect}: expected a fraction >= 0, like 0.05")
        check(0 < self.alpha < 1, lambda: f"alpha {self.alpha}: expected a probability between 0 and 1, like 0.01")
        check(0 < self.confidence < 1, lambda: f"confidence {self.confidence}: expected a level like 0.95")
        check(self.resamples >= 10, lambda: f"resamples {self.resamples}: expected at least 10")


@dataclass(frozen=True)
class Decision:
    """B compared with A: ratio of medians (B / A, > 1 means B is slower), its CI, p-value, verdict."""

    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    verdict: str


def mann_whitney_u(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """(U of `a`, two-sided p-value): U counts pairs with a > b (ties count one half)."""
    check(len(a) > 0 and len(b) > 0, lambda: f"Mann-Whitney U needs samples on both sides, got {len(a)} and {len(b)}")
    n_a, n_b = len(a), len(b)
    values = np.concatenate([np.asarray(a, dtype=float), np.asarray(b, dtype=float)])
    ranks, tie_counts = _average_ranks(values)
    u_a = float(ranks[:n_a].sum() - n_a * (n_a + 1) / 2)
    n = n_a + n_b
    tie_term = float((tie_counts**3 - tie_counts).sum()) / (n * (n - 1)) if n > 1 else 0.0
    variance = n_a * n_b / 12 * ((n + 1) - tie_term)
    if variance <= 0:
        return u_a, 1.0  # NOTE: every value equal: no evidence of any difference
    z = (abs(u_a - n_a * n_b / 2) - 0.5) / math.sqrt(variance)
    return u_a, min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2)))


def bootstrap_ratio_ci(
    a: Sequence[float], b: Sequence[float], confidence: float = 0.95, resamples: int = 1000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of median(b) / median(a)."""
    rng = np.random.default_rng(seed)
    medians_a = _bootstrap_medians(np.asarray(a, dtype=float), resamples, rng)
    medians_b = _bootstrap_medians(np.asarray(b, dtype=float), resamples, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = medians_b / medians_a
    tail = (1 - confidence) / 2
    low, high = np.quantile(ratios, [tail, 1 - tail])
    return float(low), float(high)


def decide(a: Sequence[float], b: Sequence[float], settings: DecisionSettings | None = None) -> Decision:
    """Compares the timing samples of B with A's (seconds; at least one each)."""
    settings = settings or DecisionSettings()
    check(len(a) > 0 and len(b) > 0, lambda: f"cannot compare {len(a)} samples of A with {len(b)} of B")
    median_a, median_b = float(np.median(a)), float(np.median(b))
    ratio = median_b / median_a if median_a > 0 else math.inf
    _, p_value = mann_whitney_u(a, b)
    ci_low, ci_high = bootstrap_ratio_ci(a, b, settings.confidence, settings.resamples, settings.seed)
    significant = p_value < settings.alpha
    if significant and ratio >= 1 + settings.min_effect:
        verdict = SLOWER
    elif significant and ratio <= 1 / (1 + settings.min_effect):
        verdict = FASTER
    else:
        verdict = NO_CHANGE
    return Decision(ratio, ci_low, ci_high, p_value, verdict)


def _average_ranks(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ranks 1..n with tied values sharing the mean of their ranks, the size of each group of ties)."""
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    last = np.cumsum(counts)
    first = last - counts + 1
    return ((first + last) / 2)[inverse], counts


def _bootstrap_medians(samples: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Medians of `resamples` resamples with replacement, drawn in chunks to bound memory."""
    n = len(samples)
    chunk = max(1, _BOOTSTRAP_CHUNK_ELEMENTS // max(n, 1))
    medians = []
    for start in range(0, resamples, chunk):
        count = min(chunk, resamples - start)
        medians.append(np.median(samples[rng.integers(0, n, size=(count, n))], axis=1))
    return np.concatenate(medians)
