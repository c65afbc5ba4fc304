"""Regressions in ASV histories: step changes per benchmark series, with the commits between which
each appeared.

A series is one metric of one (case, params, variant) on one machine and environment, ordered by
commit date (what `fusebench run` and `asv run` record as the result's date). Its values are fitted
with a piecewise-constant function by asv's own step detection (`asv.step_detect.detect_steps`,
the same fit `asv publish` uses), weighted by 1/IQR where the result has quartiles; an upward step
larger than `threshold` (relative, 5% by default, like asv's `regressions_thresholds`) that is
not undone later is a regression (`asv.step_detect.detect_regressions`). It appeared after the
last commit of the lower level and no later than the first commit of the higher one: `git log
BEFORE..AFTER` lists the suspects.

Every checked metric is lower-is-better: time per call, compile time, recompilations, kernels and
fusions per call (and of a training step's backward), and the device memory a measurement
allocated at its peak (the host RSS is not checked: it counts the whole process, imports and
allocator caches included). Bandwidth and its fraction of peak are
bytes / time, so a time regression is their regression too; they are not checked twice. Changes
of compile time under 10 ms are noise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
from asv.step_detect import detect_regressions, detect_steps

from fusebench.measure.outcome import (
    COMPILE,
    FUSIONS,
    FUSIONS_BACKWARD,
    KERNELS,
    KERNELS_BACKWARD,
    PEAK_DEVICE,
    RECOMPILATIONS,
    TIME,
)

CHECKED_METRICS = (
    TIME.name,
    COMPILE.name,
    RECOMPILATIONS.name,
    KERNELS.name,
    FUSIONS.name,
    KERNELS_BACKWARD.name,
    FUSIONS_BACKWARD.name,
    PEAK_DEVICE.name,
)
MIN_ABSOLUTE_CHANGE = {COMPILE.name: 0.01}
SERIES_KEY = ["machine", "env", "suite", "case", "params", "variant", "metric"]


@dataclass(frozen=True)
class Regression:
    """An upward step in one series: the last commit before it, the first after it, both levels."""

    machine: str
    env: str
    suite: str
    case: str
    params: str
    variant: str
    metric: str
    unit: str
    before_commit: str
    after_commit: str
    value_before: float
    value_after: float

    @property
    def change(self) -> float:
        """Relative change of the level: 0.3 for 30% worse; inf from a level of 0."""
        if self.value_before == 0:
            return math.inf
        return self.value_after / self.value_before - 1

    @property
    def commit_range(self) -> str:
        """'abc12345..def67890': `git log` of this range lists the commits that may have caused it."""
        return f"{self.before_commit[:8]}..{self.after_commit[:8]}"


def find_regressions(
    frame: pd.DataFrame, threshold: float = 0.05, metrics: Sequence[str] = CHECKED_METRICS
) -> list[Regression]:
    """Every regression in the histories of `frame` (a `fusebench.history.read_results` DataFrame)."""
    if frame.empty:
        return []
    selected = frame[frame.metric.isin(metrics) & frame.value.notna()]
    found: list[Regression] = []
    for key, series in selected.groupby(SERIES_KEY, sort=True, dropna=False):
        found.extend(series_regressions(dict(zip(SERIES_KEY, key)), ordered_series(series), threshold))
    return sorted(found, key=lambda r: (-_sortable(r.change), r.suite, r.case, r.params, r.variant))


def ordered_series(series: pd.DataFrame) -> pd.DataFrame:
    """One row per commit, oldest first (by commit date, then commit hash for equal dates)."""
    ordered = series.sort_values(["date", "commit"], kind="stable")
    return ordered.drop_duplicates("commit", keep="last").reset_index(drop=True)


def series_regressions(key: dict[str, str], series: pd.DataFrame, threshold: float) -> list[Regression]:
    """The regressions of one ordered series (`key` names it)."""
    if len(series) < 2:
        return []
    values = [float(v) for v in series.value]
    steps = detect_steps(values, _weights(series))
    _, _, jumps = detect_regressions(steps, threshold)
    floor = MIN_ABSOLUTE_CHANGE.get(key["metric"], 0.0)
    unit = str(series.unit.iloc[0])
    regressions = []
    for before, after, value_before, value_after in jumps or []:
        if value_after - value_before < floor:
            continue
        commits = series.commit
        regressions.append(
            Regression(
                **key,
                unit=unit,
                before_commit=str(commits.iloc[before]),
                after_commit=str(commits.iloc[after]),
                value_before=float(value_before),
                value_after=float(value_after),
            )
        )
    return regressions


def _weights(series: pd.DataFrame) -> list[float | None] | None:
    """1 / IQR per point where quartiles were recorded (asv weighs by 2 / CI width the same way)."""
    if "q25" not in series or series.q25.isna().all():
        return None
    weights: list[float | None] = []
    for q25, q75 in zip(series.q25, series.q75):
        spread = (q75 - q25) if q25 is not None and q75 is not None else math.nan
        weights.append(1 / spread if spread and spread > 0 and math.isfinite(spread) else None)
    return weights


def _sortable(value: float) -> float:
    return 1e300 if math.isinf(value) else value
