"""Pairing the two sides' measurements per benchmark, the verdicts, the table and the JSON document.

A benchmark is one (suite, case, params, variant); its time samples are kept per round (one
`fusebench run` process each; seconds per call). Verdicts:
- faster / slower / no change / noisy: both sides measured it; `fusebench.compare.decide` decided
  on all the rounds' samples (a hierarchical bootstrap: rounds, then samples within rounds); noisy
  means the interval is too wide to decide, and the notes say how many rounds would.
  Rows still noisy after the planned rounds may get follow-up rounds (`fusebench.compare.followup`):
  each row is decided at the alpha of its last look (`fusebench.compare.looks`), and its notes say
  how many rounds it got.
- failed: a side's result disagreed with the reference or errored in some round, or a side's
  run ended without results.
- new: only B measures it (a new case or variant, or one A could not run).
- gone: only A measures it (B dropped it, or cannot run it any more).
- skipped: neither side can run it here (the reason is shown).
The comparison regresses, and `fusebench compare` exits 1, when a benchmark is slower or B failed.
Peak device memory is compared as its own row after the time row, with the same decision
(`fusebench.compare.memory_rows`): "slower" there means more memory, and regresses too.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from fusebench.cases.case import format_params
from fusebench.compare.decide import (
    FASTER,
    MAX_ROUNDS,
    NO_CHANGE,
    NOISY,
    SLOWER,
    Decision,
    DecisionSettings,
    center,
    decide,
)
from fusebench.compare.interleave import SideRun
from fusebench.compare.looks import LookSchedule
from fusebench.compare.memory_rows import memory_cells, memory_comparisons
from fusebench.compare.why import Explanation, explain
from fusebench.history.artifacts import read_artifacts
from fusebench.measure.outcome import TIME
from fusebench.report.table import format_seconds

FAILED, NEW, GONE, SKIPPED = "failed", "new", "gone", "skipped"
VERDICTS = ("faster", SLOWER, NOISY, NO_CHANGE, FAILED, NEW, GONE, SKIPPED)
HEADERS = ["case", "params", "variant", "A time", "B time", "B/A", "CI", "p", "verdict", "notes"]
_BAD = ("failed", "error", "crashed")


@dataclass
class SideSummary:
    """What one side measured for one benchmark over all its rounds."""

    status: str = "missing"
    detail: str = ""
    rounds: list[list[float]] = field(default_factory=list)
    round_medians: list[float] = field(default_factory=list)
    compile_seconds: list[float] = field(default_factory=list)
    recompilations: list[int] = field(default_factory=list)
    artifacts: str = ""  # the folder of the compiler's record of its last round (fusebench.history.artifacts)
    peak_device_bytes: list[float] = field(default_factory=list)  # per ok round (fusebench.compare.memory_rows)
    look: int = 0  # the last look whose rounds measured it (0: the planned rounds only)
    follow_ups: int = 0  # of its ok rounds, how many were follow-up rounds

    @property
    def median(self) -> float | None:
        """The mean over rounds of each round's median (seconds per call), as `decide.center` defines it."""
        return center(self.rounds) if self.rounds else None


@dataclass
class BenchmarkComparison:
    """One benchmark compared: both sides' summaries, the decision (if both measured) and the verdict."""

    suite: str
    case: str
    params: dict[str, Any]
    variant: str
    a: SideSummary
    b: SideSummary
    verdict: str
    decision: Decision | None = None
    why: Explanation | None = None
    metric: str = TIME.name  # time_call, or a memory metric's name (fusebench.compare.memory_rows)

    @property
    def follow_ups(self) -> int:
        """The follow-up rounds both sides measured this benchmark in (0: the planned rounds only)."""
        return min(self.a.follow_ups, self.b.follow_ups)

    @property
    def look(self) -> int:
        """The last look that measured this benchmark (0: the planned rounds)."""
        return max(self.a.look, self.b.look)

    @property
    def key(self) -> tuple[str, str, str, str]:
        """(suite, case, params as JSON, variant): what identifies its outcomes (`outcome_key`)."""
        return (self.suite, self.case, json.dumps(self.params), self.variant)

    @property
    def regressed(self) -> bool:
        """Slower, or B failed: what makes `fusebench compare` exit 1."""
        return self.verdict == SLOWER or (self.verdict == FAILED and self.b.status in _BAD)

    def notes(self) -> str:
        """Why it changed (from the compiler's records), compile time and recompilation changes, or why
        there is no decision."""
        if self.verdict in (FAILED, SKIPPED, NEW, GONE):
            detail = _side_detail(self)
            return f"{detail}; {self.why.reason}" if self.why and self.verdict == FAILED else detail
        notes = [*_interval_notes(self.decision)] if self.verdict in (NO_CHANGE, NOISY) else []
        if self.follow_ups:
            rounds = min(len(self.a.rounds), len(self.b.rounds))
            notes.append(f"after {rounds} rounds ({self.follow_ups} follow-up)")
        if self.why is not None:
            notes.append(self.why.reason)
        if self.a.recompilations and self.b.recompilations and self.a.recompilations != self.b.recompilations:
            notes.append(f"recompilations {max(self.a.recompilations)} -> {max(self.b.recompilations)}")
        if self.a.compile_seconds and self.b.compile_seconds:
            compile_a, compile_b = statistics.median(self.a.compile_seconds), statistics.median(self.b.compile_seconds)
            if compile_a > 0 and abs(compile_b / compile_a - 1) > 0.25 and max(compile_a, compile_b) > 0.01:
                notes.append(f"compile {compile_a:.3f} s -> {compile_b:.3f} s")
        return "; ".join(notes)


def compare_runs(
    runs_a: Sequence[SideRun],
    runs_b: Sequence[SideRun],
    settings: DecisionSettings | None = None,
    schedule: LookSchedule | None = None,
) -> list[BenchmarkComparison]:
    """Every benchmark either side ran, in the order first seen, with its verdict; with a `schedule`
    of follow-ups, each decided at the alpha of the last look that measured it."""
    summaries_a, order = _summarize(runs_a)
    summaries_b, order_b = _summarize(runs_b)
    order += [key for key in order_b if key not in summaries_a]
    crash_a, crash_b = _crash(runs_a), _crash(runs_b)
    comparisons = []
    for key in order:
        suite, case, params_json, variant = key
        a = summaries_a.get(key) or _missing(crash_a)
        b = summaries_b.get(key) or _missing(crash_b)
        comparison = BenchmarkComparison(suite, case, _tuples(json.loads(params_json)), variant, a, b, NO_CHANGE)
        looked = schedule.settings_at(comparison.look, settings or DecisionSettings()) if schedule else settings
        comparison.verdict, comparison.decision = _verdict(a, b, looked)
        if schedule and comparison.decision and comparison.verdict == NOISY:
            # NOTE: more rounds are decided by follow-up looks, at their smaller alpha: the advice
            # projects at that alpha, as the choice of the rows that get follow-ups does
            advice = schedule.rounds_advice(comparison.decision)
            comparison.decision = replace(comparison.decision, rounds_needed=advice)
        comparisons.append(comparison)
        comparisons += memory_comparisons(comparison, looked)
    return comparisons


def explain_changes(comparisons: Sequence[BenchmarkComparison]) -> None:
    """Sets `why` of every benchmark that is slower, faster, failed, noisy or whose interval excludes 1
    (a change below the minimum effect) where both sides left a compiler record."""
    for comparison in comparisons:
        decision = comparison.decision
        interesting = comparison.verdict in (FASTER, SLOWER, FAILED, NOISY) or (
            decision is not None and decision.excludes_one
        )
        if interesting and comparison.metric == TIME.name:
            files_a, files_b = read_artifacts(comparison.a.artifacts), read_artifacts(comparison.b.artifacts)
            comparison.why = explain(files_a, files_b, comparison.verdict) if comparison.a.artifacts else None


def render(comparisons: Sequence[BenchmarkComparison]) -> str:
    """The comparison table as text (the interval's header names its confidence level, '99% CI')."""
    levels = {c.decision.confidence for c in comparisons if c.decision}
    headers = [f"{levels.pop():.0%} CI" if len(levels) == 1 and h == "CI" else h for h in HEADERS]
    rows = [headers] + [_cells(c) for c in comparisons]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADERS) - 1)]
    lines = []
    for index, row in enumerate(rows):
        cells = [cell.rjust(w) if 3 <= i <= 7 else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths))]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
        if index == 0:
            lines.append("  ".join("-" * w for w in widths) + "  -----")
    return "\n".join(lines)


def summary_line(comparisons: Sequence[BenchmarkComparison]) -> str:
    """'2 slower, 1 faster, 5 no change' (verdicts in a fixed order)."""
    counts = {verdict: sum(c.verdict == verdict for c in comparisons) for verdict in VERDICTS}
    return ", ".join(f"{count} {verdict}" for verdict, count in counts.items() if count) or "nothing compared"


def noisy_advice(comparisons: Sequence[BenchmarkComparison]) -> str:
    """What would decide the noisy rows: 'noisy rows need about 12 rounds (--max-rounds 12)', or ''. The
    flag is `--max-rounds`: with it only the rows left noisy by the planned rounds get more."""
    noisy = [c.decision for c in comparisons if c.verdict == NOISY and c.decision]
    if not noisy:
        return ""
    needed = [d.rounds_needed for d in noisy if d.rounds_needed is not None]
    undecidable = len(noisy) - len(needed)
    parts = (
        [f"{len(needed)} noisy row(s) need about {max(needed)} rounds (--max-rounds {max(needed)})"] if needed else []
    )
    if undecidable:
        parts.append(
            f"{undecidable} noisy row(s) sit at the minimum effect's edge (over {MAX_ROUNDS} rounds would be needed)"
        )
    return "; ".join(parts)


def comparison_document(comparisons: Sequence[BenchmarkComparison], header: dict[str, Any]) -> dict[str, Any]:
    """The `--json` document: `header` (revisions, settings) plus every benchmark with raw samples."""
    benchmarks = []
    for comparison in comparisons:
        entry = asdict(comparison)
        entry["decision"] = asdict(comparison.decision) if comparison.decision else None
        entry["regressed"] = comparison.regressed
        entry["rounds"], entry["follow_up_rounds"] = (
            min(len(comparison.a.rounds), len(comparison.b.rounds)),
            comparison.follow_ups,
        )
        entry["a"]["median"], entry["b"]["median"] = comparison.a.median, comparison.b.median
        benchmarks.append(entry)
    return {**header, "summary": summary_line(comparisons), "benchmarks": benchmarks}


def _summarize(runs: Sequence[SideRun]) -> tuple[dict[tuple, SideSummary], list[tuple]]:
    summaries: dict[tuple, SideSummary] = {}
    order: list[tuple] = []
    for run in runs:
        for outcome in run.outcomes:
            key = outcome_key(outcome)
            if key not in summaries:
                summaries[key] = SideSummary(status=outcome["status"], detail=outcome.get("detail", ""))
                order.append(key)
            _add(summaries[key], outcome)
            summaries[key].look = max(summaries[key].look, run.look)
            summaries[key].follow_ups += bool(run.look) and outcome["status"] == "ok" and bool(outcome.get("timing"))
    return summaries, order


def outcome_key(outcome: dict[str, Any]) -> tuple[str, str, str, str]:
    """(suite, case, params as JSON, variant) of a run's outcome: the benchmark it measured."""
    return (outcome["suite"], outcome["case"], json.dumps(outcome["params"]), outcome["variant"])


def _add(summary: SideSummary, outcome: dict[str, Any]) -> None:
    status = outcome["status"]
    summary.artifacts = outcome.get("extra", {}).get("artifacts", summary.artifacts)
    if status in _BAD or (summary.status == "ok" and status != "ok"):
        summary.status, summary.detail = status, outcome.get("detail", "")
    timing = outcome.get("timing")
    if status == "ok" and timing:
        summary.rounds.append([float(s) for s in timing["samples"]])
        summary.round_medians.append(float(timing["median"]))
    if status == "ok" and outcome.get("compile_seconds") is not None:
        summary.compile_seconds.append(float(outcome["compile_seconds"]))
    if status == "ok" and outcome.get("recompilations") is not None:
        summary.recompilations.append(int(outcome["recompilations"]))
    if status == "ok" and outcome.get("peak_device_bytes") is not None:
        summary.peak_device_bytes.append(float(outcome["peak_device_bytes"]))


def _missing(crash: str) -> SideSummary:
    """What a side that never reported a benchmark measured: a failure when one of its runs crashed."""
    return SideSummary(status="failed", detail=crash) if crash else SideSummary()


def _crash(runs: Sequence[SideRun]) -> str:
    errors = [f"round {run.round + 1}: fusebench run {run.error}" for run in runs if run.error]
    return errors[0] if errors else ""


def _verdict(a: SideSummary, b: SideSummary, settings: DecisionSettings | None) -> tuple[str, Decision | None]:
    if a.status in _BAD or b.status in _BAD:
        return FAILED, None
    measured_a, measured_b = a.status == "ok" and bool(a.rounds), b.status == "ok" and bool(b.rounds)
    if measured_a and measured_b:
        decision = decide(a.rounds, b.rounds, settings)
        return decision.verdict, decision
    if measured_b:
        return NEW, None
    if measured_a:
        return GONE, None
    return SKIPPED, None


def _side_detail(comparison: BenchmarkComparison) -> str:
    a, b = comparison.a, comparison.b
    parts = []
    for label, side in (("A", a), ("B", b)):
        if side.status != "ok":
            detail = side.detail.splitlines()[0] if side.detail else ""
            parts.append(f"{label} {side.status}" + (f": {detail}" if detail else ""))
    text = "; ".join(parts)
    return text if len(text) <= 140 else text[:137] + "..."


def _interval_notes(decision: Decision | None) -> list[str]:
    """What the interval says beyond the verdict: a change smaller than (or maybe smaller than) the
    minimum effect, and how many rounds a noisy row needs."""
    if decision is None:
        return []
    notes = []
    if decision.excludes_one and decision.verdict in (NO_CHANGE, NOISY):
        direction = "slower" if decision.ci_low > 1 else "faster"
        low, high = sorted(abs(bound - 1) for bound in (decision.ci_low, decision.ci_high))
        size = "below" if decision.verdict == NO_CHANGE else "maybe below"
        notes.append(f"{direction} by {low:.1%} to {high:.1%}: {size} the minimum effect")
    if decision.verdict == NOISY:
        needed = decision.rounds_needed
        notes.append(
            f"too wide to decide: would need ~{needed} rounds (--max-rounds {needed})"
            if needed is not None
            else f"B/A sits at the minimum effect's edge: over {MAX_ROUNDS} rounds would be needed"
        )
    return notes


def _cells(comparison: BenchmarkComparison) -> list[str]:
    decision = comparison.decision
    ratio = f"{decision.ratio:.3f}" if decision else "-"
    interval = f"[{decision.ci_low:.3f}, {decision.ci_high:.3f}]" if decision else "-"
    p_value = f"{decision.p_value:.2g}" if decision else "-"
    if comparison.metric != TIME.name:
        return [comparison.case, format_params(comparison.params), *memory_cells(comparison, ratio, interval, p_value)]
    return [
        comparison.case,
        format_params(comparison.params),
        comparison.variant,
        _side_time(comparison.a, decision.time_a if decision else None),
        _side_time(comparison.b, decision.time_b if decision else None),
        ratio,
        interval,
        p_value,
        comparison.verdict,
        comparison.notes(),
    ]


def _side_time(side: SideSummary, decided: float | None) -> str:
    """The time the decision compared (its statistic's center), else the side's median, else '-'."""
    if decided:
        return format_seconds(decided)
    return format_seconds(side.median) if side.rounds else "-"


def _tuples(value: Any) -> Any:
    """JSON lists back to the tuples parameters were (shape=(2, 4, 256))."""
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    if isinstance(value, dict):
        return {k: _tuples(v) for k, v in value.items()}
    return value
