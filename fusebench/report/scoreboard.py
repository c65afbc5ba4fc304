"""The scoreboard: where each variant stands in each (suite, case, params), from the latest results.

A row is one (suite, case, params) of one machine and environment; its cells are the variants'
latest measurements: a time per call, or the status and reason of a measurement that gave none
(unsupported, skipped, failed, error). A cell's ratio is its time over the row's reference: the
fastest variant of the row, or a chosen baseline variant (`fusebench report --baseline eager`);
rows the baseline did not time have no ratios. Rows are built from a `read_results` DataFrame
(the report) or from the outcomes of one run (the summary `fusebench run` prints), so both show
the same numbers.

"Ours" are the variants of our compiler (`fusebench`, `fusebench-torch`, ...); every other
variant is a peer (eager, `torch.compile`, thunder, a case's hand-written baselines).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import pandas as pd

from fusebench.cases.case import format_params
from fusebench.cases.variants import STANDARD_VARIANTS, is_ours
from fusebench.measure.noise import relative_spread
from fusebench.measure.outcome import FUSIONS, KERNELS, TIME, Outcome


@dataclass(frozen=True)
class Cell:
    """One variant's latest measurement in a row: a time, or the status and reason of a non-ok one."""

    variant: str
    status: str
    seconds: float | None = None
    detail: str = ""
    commit: str = ""
    date: float = 0.0  # the commit's date (ms since the epoch, as ASV records it)
    kernels: float | None = None
    fusions: float | None = None
    spread: float | None = None  # the measurement's IQR over its median (known for one run's outcomes)
    # this variant's time over another's, from samples timed alternately, and the spread of the
    # pairs' ratios (one run's outcomes: `fusebench.measure.paired`), by the other's name
    paired: dict[str, tuple[float, float | None]] = field(default_factory=dict)

    @property
    def timed(self) -> bool:
        """Whether the cell holds a positive time per call of a correct result."""
        return self.status == "ok" and self.seconds is not None and self.seconds > 0


@dataclass(frozen=True)
class Row:
    """One (suite, case, params): its cells by variant."""

    suite: str
    case: str
    params: str
    cells: dict[str, Cell] = field(default_factory=dict)

    def fastest(self, peers_only: bool = False) -> Cell | None:
        """The timed cell with the shortest time (among peers only, if asked), or None."""
        timed = [c for c in self.cells.values() if c.timed and not (peers_only and is_ours(c.variant))]
        return min(timed, key=lambda c: c.seconds or 0.0) if timed else None

    def paired(self, variant: str, other: str) -> tuple[float, float | None] | None:
        """`variant`'s time over `other`'s from their samples timed alternately (either cell may
        hold them), with the spread of the pairs' ratios; None where they were not paired."""
        mine, theirs = self.cells.get(variant), self.cells.get(other)
        if mine is not None and other in mine.paired:
            return mine.paired[other]
        if theirs is not None and variant in theirs.paired:
            ratio, spread = theirs.paired[variant]
            return 1.0 / ratio, spread
        return None

    def newest_commit(self) -> str:
        """The commit of the row's most recently dated cell ('' for a run's outcomes)."""
        return max(self.cells.values(), key=lambda c: (c.date, c.commit)).commit if self.cells else ""

    def reference(self, baseline: str | None = None) -> Cell | None:
        """What ratios are taken against: the `baseline` variant's cell if it is timed, else (no
        baseline) the fastest cell; None when there is nothing to compare with."""
        if baseline is None:
            return self.fastest()
        cell = self.cells.get(baseline)
        return cell if cell is not None and cell.timed else None

    def ratio(self, variant: str, baseline: str | None = None) -> float | None:
        """`variant`'s time over the reference's (> 1: slower than the reference), or None."""
        cell, reference = self.cells.get(variant), self.reference(baseline)
        if cell is None or not cell.timed or reference is None:
            return None
        return float(cell.seconds) / float(reference.seconds)  # type: ignore[arg-type]


def variant_order(variants: Iterable[str]) -> list[str]:
    """The distinct `variants`, the standard ones first in their usual order (eager, torch.compile,
    fusebench, fusebench-torch, thunder), then the others by name."""
    standard = [variant.name for variant in STANDARD_VARIANTS]
    rank = {name: index for index, name in enumerate(standard)}
    return sorted(set(map(str, variants)), key=lambda name: (rank.get(name, len(standard)), name))


def variant_columns(rows: Sequence[Row]) -> list[str]:
    """Every variant of `rows`, in `variant_order` (the scoreboard's columns)."""
    return variant_order(variant for row in rows for variant in row.cells)


def rows_from_outcomes(outcomes: Sequence[Outcome]) -> list[Row]:
    """The rows of one run's outcomes, in the order they were measured."""
    rows: dict[tuple[str, str, str], Row] = {}
    for outcome in outcomes:
        key = (outcome.suite, outcome.case, format_params(outcome.params))
        row = rows.setdefault(key, Row(*key))
        timing = outcome.timing if outcome.status == "ok" else None
        row.cells[outcome.variant] = Cell(
            variant=outcome.variant,
            status=outcome.status,
            seconds=None if timing is None else timing.median,
            detail=outcome.detail,
            kernels=outcome.kernels_per_call,
            fusions=outcome.fusions_per_call,
            spread=None if timing is None else relative_spread(timing.median, timing.q25, timing.q75),
            paired=outcome.paired_ratios() if timing is not None else {},
        )
    return list(rows.values())


def rows_from_frame(frame: pd.DataFrame) -> list[Row]:
    """The rows of a `read_results` DataFrame of ONE machine and environment: each cell is that
    variant's newest recorded measurement of the (suite, case, params), ok or not; combinations
    with no measurement at all (status "missing") are left out. Rows are ordered by suite and case."""
    times = frame[(frame.metric == TIME.name) & (frame.status != "missing")]
    if times.empty:
        return []
    series = ["suite", "case", "params", "variant"]
    latest = times.sort_values(["date", "commit"], kind="stable").drop_duplicates(series, keep="last")
    counts = _counts_by_series(frame)
    rows: dict[tuple[str, str, str], Row] = {}
    for entry in latest.sort_values(["suite", "case"], kind="stable").itertuples(index=False):
        key = (str(entry.suite), str(entry.case), str(entry.params))
        row = rows.setdefault(key, Row(*key))
        value = None if pd.isna(entry.value) else float(entry.value)
        kernels, fusions = counts.get((*key, str(entry.variant), str(entry.commit)), (None, None))
        row.cells[str(entry.variant)] = Cell(
            variant=str(entry.variant),
            status=str(entry.status),
            seconds=value,
            detail="" if pd.isna(entry.detail) else str(entry.detail),
            commit=str(entry.commit),
            date=0.0 if pd.isna(entry.date) else float(entry.date),
            kernels=kernels,
            fusions=fusions,
        )
    return list(rows.values())


def _counts_by_series(frame: pd.DataFrame) -> dict[tuple, tuple[float | None, float | None]]:
    """(kernels, fusions) per call by (suite, case, params, variant, commit)."""
    counts: dict[tuple, list[float | None]] = {}
    wanted = frame[frame.metric.isin([KERNELS.name, FUSIONS.name]) & frame.value.notna()]
    for entry in wanted.itertuples(index=False):
        key = (str(entry.suite), str(entry.case), str(entry.params), str(entry.variant), str(entry.commit))
        slot = counts.setdefault(key, [None, None])
        slot[0 if entry.metric == KERNELS.name else 1] = float(entry.value)
    return {key: (kernels, fusions) for key, (kernels, fusions) in counts.items()}
