"""`fusebench run`'s use of the peer cache (`fusebench.history.peer_cache`): which units to measure,
which to reuse, and which reused ones to measure again."""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from fusebench.cases.selection import Group
from fusebench.cases.variants import Variant
from fusebench.errors import check
from fusebench.history.peer_cache import DRIFT, PeerCache, drifted, median
from fusebench.history.results import RunInfo, write_outcomes
from fusebench.measure.outcome import Outcome

Done = Callable[[int, Outcome], None]  # told each unit's outcome as it finishes
Measure = Callable[[list[int], Done], dict[int, Outcome]]  # measures unit indices, telling `Done` as it goes
SAVE_EVERY_S = 10.0  # the longest a measured peer waits to be written into the cache file


class _Keeper:
    """Keeps peers in the cache as they are measured: written at most every `SAVE_EVERY_S` and when
    the measuring stops early (an interruption), so a killed run loses at most those seconds."""

    def __init__(self, units: Sequence[tuple[Group, Variant]], cache: PeerCache, commit: str) -> None:
        self.units, self.cache, self.commit = units, cache, commit
        self.eager: dict[str, Outcome] = {}
        self.saved = time.monotonic()

    def done(self, index: int, outcome: Outcome) -> None:
        """Remembers a measured peer (with its case's eager where already measured, else none: a
        later run measures it again rather than trust it unchecked)."""
        group, variant = self.units[index]
        if variant.name == "eager":
            self.eager[group.case_id] = outcome
        elif variant.reusable:
            self.cache.remember(group.case_id, outcome, self.commit, self.eager.get(group.case_id))
            if time.monotonic() - self.saved >= SAVE_EVERY_S:
                self.cache.save()
                self.saved = time.monotonic()

    def measuring(self, measure: Measure, indices: list[int]) -> dict[int, Outcome]:
        """`measure(indices)`, saving the peers measured so far if it stops early."""
        try:
            return measure(indices, self.done)
        except BaseException:
            self.cache.save()
            raise


def _key(unit: tuple[Group, Variant]) -> tuple[str, str]:
    return unit[0].case_id, unit[1].name


def measure_reusing_peers(
    units: Sequence[tuple[Group, Variant]],
    run_info: RunInfo,
    cache: PeerCache,
    measure: Measure,
    results: Path,
    reuse: bool = True,
    unit_timeout_s: float | None = None,
    not_measured: Callable[[int], Outcome] | None = None,
) -> list[Outcome]:
    """Every unit's outcome, in order: a reusable peer's from `cache` (with `reuse`: not under
    --remeasure-peers) where its case's eager, measured now, has not drifted; the rest from
    `measure(unit indices)`. A peer kept as stopped at the unit time limit is reused where this run's
    `unit_timeout_s` is no longer. Reused outcomes are recorded in this run's results like measured
    ones; freshly measured peers are kept in the cache, as they finish (a run interrupted or killed
    keeps the peers it measured). A unit `measure` left unmeasured (the run's time limit passed)
    is `not_measured(its index)`."""
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
    keeper = _Keeper(units, cache, run_info.revision.commit)
    outcomes = keeper.measuring(measure, todo) if todo else {}
    eager_now = {units[i][0].case_id: o for i, o in outcomes.items() if units[i][1].name == "eager"}
    again = [
        i
        for i in reused
        if drifted(
            median(eager_now.get(units[i][0].case_id)),
            cache.eager_median(*_key(units[i])),
            cache.tolerance(units[i][0].case_id),
        )
    ]
    for case_id, eager in eager_now.items():
        cache.note_eager(case_id, median(eager))
    if again:
        print(
            f"fusebench run: measuring {len(again)} reused peer measurements again: their cases' eager times "
            f"moved more than {DRIFT:.0%} (or than their own run-to-run spread, where wider) since they were measured",
            file=sys.stderr,
        )
        outcomes.update(keeper.measuring(measure, again))
    for index in again:
        del reused[index]
    if reused:
        write_outcomes(results, run_info, list(reused.values()))
    for index, outcome in outcomes.items():
        group, variant = units[index]
        if variant.reusable:
            cache.remember(group.case_id, outcome, run_info.revision.commit, eager_now.get(group.case_id))
    if eager_now or any(units[i][1].reusable for i in outcomes):
        cache.save()
    left = [i for i in range(len(units)) if i not in reused and i not in outcomes]
    check(not left or not_measured is not None, lambda: f"{len(left)} units were not measured", AssertionError)
    return [reused[i] if i in reused else outcomes[i] if i in outcomes else not_measured(i) for i in range(len(units))]
