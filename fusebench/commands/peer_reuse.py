"""`fusebench run`'s use of the peer cache (`fusebench.history.peer_cache`): which units to measure,
which to reuse, and which reused ones to measure again."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from fusebench.cases.selection import Group
from fusebench.cases.variants import Variant
from fusebench.history.peer_cache import DRIFT, PeerCache, drifted, median
from fusebench.history.results import RunInfo, write_outcomes
from fusebench.measure.outcome import Outcome


def _key(unit: tuple[Group, Variant]) -> tuple[str, str]:
    return unit[0].case_id, unit[1].name


def measure_reusing_peers(
    units: Sequence[tuple[Group, Variant]],
    run_info: RunInfo,
    cache: PeerCache,
    measure: Callable[[list[int]], dict[int, Outcome]],
    results: Path,
    reuse: bool = True,
    unit_timeout_s: float | None = None,
) -> list[Outcome]:
    """Every unit's outcome, in order: a reusable peer's from `cache` (with `reuse`: not under
    --remeasure-peers) where its case's eager, measured now, has not drifted; the rest from
    `measure(unit indices)`. A peer kept as stopped at the unit time limit is reused where this run's
    `unit_timeout_s` is no longer. Reused outcomes are recorded in this run's results like measured
    ones; freshly measured peers are kept in the cache."""
    reused: dict[int, Outcome] = {}
    if reuse:
        for index, (group, variant) in enumerate(units):
            if variant.reusable and any(v.name == "eager" for v in group.variants):
                outcome = cache.reusable(group.case_id, variant.name, unit_timeout_s)
                if outcome is not None:
                    reused[index] = dataclasses.replace(outcome, params=dict(group.params))
    if reused:
        print(
            f"fusebench run: {len(reused)} peer measurements reused from earlier runs on this machine (same "
            "machine, libraries, harness and suite code); eager measured as the control; --remeasure-peers: "
            "measure them again",
            file=sys.stderr,
        )
    todo = [i for i in range(len(units)) if i not in reused]
    outcomes = measure(todo) if todo else {}
    eager_now = {units[i][0].case_id: o for i, o in outcomes.items() if units[i][1].name == "eager"}
    again = [
        i for i in reused if drifted(median(eager_now.get(units[i][0].case_id)), cache.eager_median(*_key(units[i])))
    ]
    if again:
        print(
            f"fusebench run: measuring {len(again)} reused peer measurements again: their cases' eager times "
            f"moved more than {DRIFT:.0%} since they were measured",
            file=sys.stderr,
        )
        outcomes.update(measure(again))
    for index in again:
        del reused[index]
    if reused:
        write_outcomes(results, run_info, list(reused.values()))
    for index, outcome in outcomes.items():
        group, variant = units[index]
        if variant.reusable:
            cache.remember(group.case_id, outcome, run_info.revision.commit, eager_now.get(group.case_id))
    if any(units[i][1].reusable for i in outcomes):
        cache.save()
    return [reused[i] if i in reused else outcomes[i] for i in range(len(units))]
