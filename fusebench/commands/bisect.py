"""`fusebench bisect GOOD BAD`: the first commit that made each benchmark compare flags slower.

First `fusebench compare GOOD BAD` (same flags, same statistics); for every benchmark it calls
slower, a binary search over the first-parent commits after GOOD up to BAD, each step a
comparison of GOOD with that commit (`fusebench.compare.bisect`: noisy steps are measured again
with more rounds), then a comparison of the first slower commit with its parent, whose "why" (the
compiler's records diffed: prims added, fusions split, kernels) is printed with it. Exit status 1
when a benchmark was slower at BAD, 0 when nothing was (2 for bad arguments).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Hashable
from pathlib import Path

from fusebench.cases.case import format_params
from fusebench.cases.selection import Selection, add_selection_arguments, selection_from_args
from fusebench.commands.compare import compare_header, measure_revisions
from fusebench.compare.arguments import CompareOptions, add_decision_arguments, options_from_args
from fusebench.compare.bisect import BisectResult, StepVerdict, bisect
from fusebench.compare.comparison import BenchmarkComparison, render
from fusebench.compare.decide import SLOWER
from fusebench.compare.worktree import git, repository_root, resolve_commit
from fusebench.errors import check

MAX_RETRIES = 10


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Registers `bisect`."""
    parser = subparsers.add_parser(
        "bisect", help="find the commit that made each benchmark slower between two revisions"
    )
    parser.add_argument("good", metavar="GOOD", help="a revision before the slowdown, e.g. v1.0")
    parser.add_argument("bad", metavar="BAD", help="a later revision that is slower, e.g. main")
    add_selection_arguments(parser)
    add_decision_arguments(parser)
    parser.add_argument(
        "--retries",
        type=int,
        default=2,
        help=f"measurements again of a noisy step, with more rounds (default 2; 0 to {MAX_RETRIES})",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Bisects every benchmark compare flags slower; prints each one's first slower commit and why."""
    selection = selection_from_args(args)
    options = options_from_args(args, selection)
    check(
        0 <= args.retries <= MAX_RETRIES,
        lambda: f"--retries {args.retries}: expected a whole number of retries from 0 to {MAX_RETRIES}",
    )
    repo = repository_root(args.repo or Path.cwd())
    good, bad = resolve_commit(repo, args.good), resolve_commit(repo, args.bad)
    commits = git(repo, "rev-list", "--first-parent", "--reverse", f"{good}..{bad}").split()
    check(commits, lambda: f"{args.bad} has no commits after {args.good} (expected GOOD to be an ancestor of BAD)")
    bench = _Bench(repo, selection, options)
    _report(f"{len(commits)} commits after {args.good} ({good[:8]}) up to {args.bad} ({bad[:8]})")
    first = bench.compare(good, bad, (args.good, args.bad), options.rounds)
    flagged = [c for c in first if c.verdict == SLOWER]
    if not flagged:
        print(render(first))
        print(f"\ncompare flags nothing slower from {args.good} to {args.bad}: nothing to bisect")
        return 0
    _report(f"compare flags {len(flagged)} slower: " + ", ".join(_label(c) for c in flagged))

    def comparator(commit: str, rounds: int) -> dict[Hashable, StepVerdict]:
        measured = first if (commit, rounds) == (bad, options.rounds) else None
        measured = measured or bench.compare(good, commit, (args.good, commit[:8]), rounds)
        return {_key(c): StepVerdict(c.verdict, c.decision.rounds_needed if c.decision else None) for c in measured}

    results = bisect(good, commits, [_key(c) for c in flagged], comparator, options.rounds, args.retries)
    for comparison, result in zip(flagged, results):
        print(_describe(repo, comparison, result, bench))
    return 1


class _Bench:
    """Comparisons of two commits with the command's selection and options (rounds per call)."""

    def __init__(self, repo: Path, selection: Selection, options: CompareOptions) -> None:
        self.repo, self.selection, self.options = repo, selection, options
        self.done: dict[tuple[str, str, int], list[BenchmarkComparison]] = {}

    def compare(self, a: str, b: str, names: tuple[str, str], rounds: int) -> list[BenchmarkComparison]:
        if (a, b, rounds) not in self.done:
            self.done[(a, b, rounds)] = self._measure(a, b, names, rounds)
        return self.done[(a, b, rounds)]

    def _measure(self, a: str, b: str, names: tuple[str, str], rounds: int) -> list[BenchmarkComparison]:
        options = dataclasses.replace(self.options, rounds=rounds)
        header = compare_header(names, (a, b), self.selection, options)
        kept_at = Path.cwd() / f"fusebench-bisect-{a[:8]}-{b[:8]}-interrupted.json"
        return measure_revisions(self.repo, names, (a, b), self.selection, options, kept_at, header).comparisons


def _describe(repo: Path, flagged: BenchmarkComparison, result: BisectResult, bench: _Bench) -> str:
    """The benchmark's first slower commit with its subject, its ratio to its parent and why; or
    between which commits the search stopped."""
    steps = ", ".join(f"{s.commit[:8]} {s.verdict} ({s.rounds} rounds)" for s in result.steps)
    if result.first_slower is None:
        low, high = result.bracket or (result.last_good, "?")
        return (
            f"{_label(flagged)}: the slowdown is after {low[:8]} and at or before {high[:8]}; "
            f"undecided: {result.undecided}\n  steps: {steps}"
        )
    commit = result.first_slower
    subject = git(repo, "log", "-1", "--format=%s", commit)
    parent = git(repo, "rev-parse", f"{commit}^")
    against_parent = bench.compare(parent, commit, (parent[:8], commit[:8]), bench.options.rounds)
    same = next((c for c in against_parent if _key(c) == _key(flagged)), None)
    decision = same.decision if same else None
    ratio = (
        f"B/A {decision.ratio:.3f} [{decision.ci_low:.3f}, {decision.ci_high:.3f}] against its parent, {same.verdict}"
        if decision and same
        else "not measured against its parent"
    )
    why = (same.notes() if same else "") or "no compiler record to explain it"
    return f"{_label(flagged)}: first slower at {commit[:8]} {subject!r}: {ratio}\n  why: {why}\n  steps: {steps}"


def _key(comparison: BenchmarkComparison) -> Hashable:
    return (comparison.suite, comparison.case, json.dumps(comparison.params, sort_keys=True), comparison.variant)


def _label(comparison: BenchmarkComparison) -> str:
    return f"{comparison.case} ({format_params(comparison.params)}) {comparison.variant}"


def _report(message: str) -> None:
    print(f"fusebench bisect: {message}", file=sys.stderr, flush=True)
