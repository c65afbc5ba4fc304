"""Peak device memory in a comparison: one more row per benchmark, judged like its time.

Each round of a side records one peak (`Outcome.peak_device_bytes`: what the measurement
allocated at its peak, CUDA only), so a side's rounds are one-sample rounds and the decision is
`fusebench.compare.decide.decide` on them, unchanged: the same significance test and minimum
effect as time. Memory is usually the same in every round, so a change of at least the minimum
effect is then reported whatever its size in rounds. A side that allocated nothing (0 bytes: a
variant that returns a view) has no ratio to take: the row is "no change" when both did, else the
side that allocated more is "slower" (more memory), as a step from 0 is for regressions.

A memory row is a copy of the time row with `metric` set to the memory metric, its sides' rounds
holding bytes; "slower" means more memory and regresses the comparison, as a slower time does.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence
from typing import Any

from fusebench.compare.decide import FASTER, NO_CHANGE, SLOWER, Decision, DecisionSettings, decide
from fusebench.measure.outcome import PEAK_DEVICE, TIME
from fusebench.report.table import format_bytes

LABELS = {SLOWER: "more memory", FASTER: "less memory", NO_CHANGE: NO_CHANGE}


def memory_comparisons(comparison: Any, settings: DecisionSettings | None = None) -> list[Any]:
    """The memory row of a time row (a `BenchmarkComparison`) whose sides both recorded peak device
    memory in their ok rounds; [] otherwise."""
    a, b = comparison.a, comparison.b
    if comparison.metric != TIME.name or a.status != "ok" or b.status != "ok":
        return []
    if not a.peak_device_bytes or not b.peak_device_bytes:
        return []
    verdict, decision = memory_verdict(a.peak_device_bytes, b.peak_device_bytes, settings)
    return [
        dataclasses.replace(
            comparison,
            a=_memory_side(a),
            b=_memory_side(b),
            verdict=verdict,
            decision=decision,
            why=None,
            metric=PEAK_DEVICE.name,
        )
    ]


def memory_verdict(
    peaks_a: Sequence[float], peaks_b: Sequence[float], settings: DecisionSettings | None = None
) -> tuple[str, Decision | None]:
    """(verdict, decision) of B's peaks against A's (bytes, one per round)."""
    if min(*peaks_a, *peaks_b) > 0:
        decision = decide([[p] for p in peaks_a], [[p] for p in peaks_b], settings)
        return decision.verdict, decision
    median_a, median_b = statistics.median(peaks_a), statistics.median(peaks_b)
    if median_a == median_b:
        return NO_CHANGE, None
    return (SLOWER if median_b > median_a else FASTER), None


def memory_cells(comparison: Any, ratio: str, interval: str, p_value: str) -> list[str]:
    """A memory row's cells from the variant column on, for `fusebench.compare.comparison.render`."""
    return [
        f"{comparison.variant} (peak device memory)",
        _center_text(comparison.a),
        _center_text(comparison.b),
        ratio,
        interval,
        p_value,
        LABELS.get(comparison.verdict, comparison.verdict),
        "",
    ]


def _memory_side(side: Any) -> Any:
    """The side with its peaks as one-sample rounds (none when a peak is 0 bytes: its center, a
    geometric mean, is defined for positive values only; `round_medians` keep the peaks)."""
    peaks = list(side.peak_device_bytes)
    rounds = [[p] for p in peaks] if min(peaks) > 0 else []
    return dataclasses.replace(side, rounds=rounds, round_medians=peaks, compile_seconds=[], recompilations=[])


def _center_text(side: Any) -> str:
    return format_bytes(side.median if side.rounds else statistics.median(side.round_medians))
