"""Follow-up rounds: more interleaved rounds of only the benchmarks the planned rounds left noisy.

After the planned rounds, every time row whose verdict is `noisy` and that the rounds up to the
cap would likely decide (`LookSchedule.wants_more`) is measured again, both sides in interleaved
rounds as before, each side selecting just those benchmarks: one `fusebench run` per side and
round, its flags naming their case ids (as `-k` patterns) and variants, and
`fusebench.cases.selection.PAIRS_ENV` the exact (case id, variant) pairs among them (flags alone
select every case named with every variant named: pairs nobody asked for; a revision older than
that variable measures them, and what else a run measures is dropped). A batch ends in a look
that decides each of its rows on all their rounds at that look's alpha
(`fusebench.compare.looks`: the looks share alpha, so the false-positive rate stays bounded);
rows still noisy go on to the next batch, up to `--max-rounds`. Rows decided earlier keep their
decision. The runs join the planned ones (`SideRun.look` says which batch), so an interruption
keeps them too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from fusebench.cases.case import format_params
from fusebench.cases.selection import PAIRS_ENV, Selection, case_id, pairs_value
from fusebench.compare.comparison import BenchmarkComparison, compare_runs, outcome_key
from fusebench.compare.decide import DecisionSettings
from fusebench.compare.interleave import Report, Side, SideRun, interleaved_rounds
from fusebench.compare.looks import LookSchedule
from fusebench.measure.outcome import TIME

RunArguments = Callable[[Selection], list[str]]
_LISTED = 4


def follow_up(
    sides: tuple[Side, Side],
    selection: Selection,
    run_arguments: RunArguments,
    scratch: Path,
    schedule: LookSchedule,
    settings: DecisionSettings,
    report: Report,
    environment: Mapping[str, str] | None,
    runs: dict[str, list[SideRun]],
) -> None:
    """Measures the rows `schedule` wants more of, batch by batch, appending the runs to `runs`;
    `run_arguments` turns a selection into `fusebench run` flags."""
    for look in range(1, schedule.follow_ups + 1):
        comparisons = compare_runs(runs["A"], runs["B"], settings, schedule)
        pending = [c for c in comparisons if _wants_more(c, look - 1, schedule)]
        if not pending:
            return
        first, count = schedule.batch(look)
        names = ", ".join(f"{c.case}({format_params(c.params)}) {c.variant}" for c in pending[:_LISTED])
        more = f" and {len(pending) - _LISTED} more" if len(pending) > _LISTED else ""
        report(
            f"follow-up {look} of at most {schedule.follow_ups}: {len(pending)} noisy row(s) get rounds "
            f"{first + 1} to {first + count} (of at most {schedule.max_rounds}): {names}{more}"
        )
        keys = {c.key for c in pending}
        pairs = pairs_value([(case_id(c.suite, c.case, c.params), c.variant) for c in pending])
        interleaved_rounds(
            sides,
            run_arguments(follow_up_selection(selection, pending)),
            scratch,
            count,
            report,
            {**(environment or {}), PAIRS_ENV: pairs},
            runs,
            first=first,
            total=first + count,
            look=look,
            keep=lambda outcome, keys=keys: outcome_key(outcome) in keys,
        )
        decided = [c for c in compare_runs(runs["A"], runs["B"], settings, schedule) if c.key in keys]
        verdicts = [c.verdict for c in decided if c.metric == TIME.name and c.look == look]
        summary = ", ".join(f"{verdicts.count(v)} {v}" for v in dict.fromkeys(verdicts)) or "nothing measured"
        report(f"follow-up {look}: {summary}")


def follow_up_selection(selection: Selection, rows: Sequence[BenchmarkComparison]) -> Selection:
    """`selection` narrowed to `rows`: their exact case ids as -k patterns (glob characters in an id
    escaped, so it matches itself only) and their variants."""
    patterns = tuple(dict.fromkeys(_exact_pattern(case_id(c.suite, c.case, c.params)) for c in rows))
    variants = tuple(dict.fromkeys(c.variant for c in rows))
    return Selection(
        suites=tuple(dict.fromkeys(c.suite for c in rows)),
        patterns=patterns,
        variants=variants,
        quick=selection.quick,
        device=selection.device,
        suite_dirs=selection.suite_dirs,
        everything=selection.everything,
    )


def _wants_more(comparison: BenchmarkComparison, look: int, schedule: LookSchedule) -> bool:
    """A time row measured by every batch up to `look` that the schedule wants more of."""
    return comparison.metric == TIME.name and comparison.look == look and schedule.wants_more(comparison.decision, look)


def _exact_pattern(identifier: str) -> str:
    """A -k pattern matching `identifier` itself: a plain substring when it has no glob characters
    (ids end in ')' and start with the suite, so another id rarely contains it, and what else is
    measured is dropped), else the id as a glob with those characters bracketed."""
    if not any(ch in identifier for ch in "*?["):
        return identifier
    return "".join(f"[{ch}]" if ch in "*?[" else ch for ch in identifier)
