"""Summary statistics of timing samples: median, quartiles (IQR), min, max, count.

Quantiles use linear interpolation between order statistics (numpy's default, and what ASV
stores as q_25 / q_75), so our IQR and ASV's agree on the same samples.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from fusebench.errors import check


@dataclass(frozen=True)
class TimingStats:
    """Seconds per call, summarized over the timed repeats."""

    median: float
    q25: float
    q75: float
    min: float
    max: float
    repeats: int
    samples: tuple[float, ...]

    @property
    def iqr(self) -> float:
        """Interquartile range: q75 - q25."""
        return self.q75 - self.q25


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """The q-quantile (0 <= q <= 1) of already sorted values, interpolating linearly."""
    check(len(sorted_values) > 0, lambda: "quantile of no values")
    check(0.0 <= q <= 1.0, lambda: f"quantile level {q} is outside [0, 1]")
    position = q * (len(sorted_values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    fraction = position - low
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * fraction


def summarize(samples: Sequence[float]) -> TimingStats:
    """Median, quartiles, min, max and count of `samples` (seconds; at least one, all finite)."""
    check(len(samples) > 0, lambda: "cannot summarize zero timing samples")
    check(
        all(math.isfinite(s) and s >= 0 for s in samples),
        lambda: f"timing samples must be finite and non-negative, got {list(samples)}",
    )
    ordered = sorted(samples)
    return TimingStats(
        median=quantile(ordered, 0.5),
        q25=quantile(ordered, 0.25),
        q75=quantile(ordered, 0.75),
        min=ordered[0],
        max=ordered[-1],
        repeats=len(ordered),
        samples=tuple(samples),
    )
