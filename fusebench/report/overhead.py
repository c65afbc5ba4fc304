"""`fusebench run --profile-overhead`: where each measurement's wall time went beyond what it is for.

A measurement is worth its compile time (what it measures) and its repeat budget (warm-up and
timed samples); everything else is overhead: preparing the case's inputs and reference, wrapping
the variant, the first call's own run time, checking it, counting kernels with the profiler,
recording what the compiler did (nvFuser segments among it), writing the results. Per
measurement, and summarized over the run (mean, median, the largest, and the mean of each phase),
from the phases `fusebench.measure.phases` recorded in `Outcome.extra["phases"]`:

    overhead per measurement: mean 0.412 s, median 0.380 s, max 1.93 s (adam_step.adam_step(...) fusebench); ...
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from fusebench.cases.case import format_params
from fusebench.measure.outcome import Outcome
from fusebench.measure.phases import PHASES
from fusebench.report.table import format_seconds

BUDGET_PHASES = ("warmup", "samples")
OVERHEAD_PHASES = tuple(name for name in PHASES if name not in BUDGET_PHASES)


@dataclass(frozen=True)
class Overhead:
    """One measurement's wall time split into compile time, repeat budget and overhead (seconds)."""

    label: str
    total: float
    compile_seconds: float
    budget: float
    phases: dict[str, float]

    @property
    def overhead(self) -> float:
        """Wall time neither compiling nor spent in the repeat budget."""
        return max(self.total - self.compile_seconds - self.budget, 0.0)


def overhead_of(outcome: Outcome) -> Overhead | None:
    """The split of one measurement, or None when it recorded no phases (a crashed unit)."""
    phases = outcome.extra.get("phases")
    if not phases:
        return None
    total = outcome.duration + phases.get("prepare_case", 0.0) + phases.get("write", 0.0)
    compile_seconds = outcome.compile_seconds or 0.0
    budget = sum(phases.get(name, 0.0) for name in BUDGET_PHASES)
    shown = {name: phases.get(name, 0.0) for name in OVERHEAD_PHASES}
    # NOTE: the first call is compile time plus one call; only the call is overhead
    shown["first_call"] = max(shown["first_call"] - compile_seconds, 0.0)
    label = f"{outcome.suite}.{outcome.case}({format_params(outcome.params)}) {outcome.variant}"
    return Overhead(label, total, compile_seconds, budget, shown)


def render_overhead(outcomes: Sequence[Outcome], run_seconds: float | None = None, workers: int = 1) -> str:
    """One line per measurement and the summary line ('' when no outcome recorded phases); with
    `run_seconds`, a last line comparing the run's wall time with its measurements' (over
    `workers` processes measuring side by side): the rest is starting processes and imports."""
    splits = [split for split in map(overhead_of, outcomes) if split is not None]
    if not splits:
        return ""
    lines = ["overhead per measurement (wall time beyond compile time and the repeat budget):"]
    for split in splits:
        parts = ", ".join(f"{name} {format_seconds(value)}" for name, value in split.phases.items() if value >= 5e-4)
        lines.append(
            f"  {split.label}: {format_seconds(split.total)} = compile {format_seconds(split.compile_seconds)} "
            f"+ repeats {format_seconds(split.budget)} + overhead {format_seconds(split.overhead)} ({parts})"
        )
    lines.append(summary_line(splits))
    if run_seconds is not None:
        measured = sum(split.total for split in splits) / workers
        lines.append(
            f"the run took {format_seconds(run_seconds)}: measurements {format_seconds(measured)}"
            f"{f' per worker ({workers} side by side)' if workers > 1 else ''}, the rest (starting processes, "
            f"imports, peak bandwidth) {format_seconds(max(run_seconds - measured, 0.0))}"
        )
    return "\n".join(lines)


def summary_line(splits: Sequence[Overhead]) -> str:
    """'overhead per measurement: mean ..., median ..., max ... (label); by phase (mean): ...'."""
    overheads = [split.overhead for split in splits]
    worst = max(splits, key=lambda split: split.overhead)
    by_phase = ", ".join(
        f"{name} {format_seconds(statistics.fmean(split.phases[name] for split in splits))}" for name in OVERHEAD_PHASES
    )
    return (
        f"overhead per measurement over {len(splits)}: mean {format_seconds(statistics.fmean(overheads))}, "
        f"median {format_seconds(statistics.median(overheads))}, max {format_seconds(worst.overhead)} "
        f"({worst.label}); by phase (mean): {by_phase}"
    )
