"""`fusebench compare A B`: is revision B faster or slower than revision A, benchmark by benchmark?

Both revisions are checked out into temporary git worktrees (removed again whatever happens),
and each side's own `fusebench run` measures the selected cases in its own process, with this
interpreter and its installed packages, over several rounds that alternate which side goes first
(`fusebench.compare.interleave`). Per benchmark, every sample of every round decides: a
hierarchical bootstrap (rounds, then samples within rounds) gives the interval of the ratio B/A of
the rounds' geometric-mean medians, and the verdict says whether it lies beyond the minimum effect
(slower, faster), within it (no change) or across its edge (noisy, with the rounds that would
decide) (`fusebench.compare.decide`, docs/verdicts.md); the table is `fusebench.compare.comparison`. Progress goes to
stderr, the table to stdout. Exit status: 1 when a benchmark got slower or fails at B, 0 otherwise
(2 for bad arguments).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from fusebench.cases.selection import Selection, add_selection_arguments, selection_from_args
from fusebench.compare.comparison import (
    compare_runs,
    comparison_document,
    explain_changes,
    noisy_advice,
    render,
    summary_line,
)
from fusebench.compare.decide import DecisionSettings
from fusebench.compare.interleave import Side, SideRun, interleaved_rounds
from fusebench.compare.worktree import repository_root, resolve_commit, temporary_worktrees, terminate_as_interrupt
from fusebench.errors import FusebenchError, check
from fusebench.files import atomic_write_json

DEFAULT_ROUNDS = 6
DEFAULT_BUDGET_S = {"cpu": 0.2, "cuda": 1.0}


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Registers `compare`."""
    parser = subparsers.add_parser(
        "compare", help="compare two git revisions benchmark by benchmark; exit 1 on a regression"
    )
    parser.add_argument("revision_a", metavar="A", help="the baseline revision (branch, tag, commit), e.g. main")
    parser.add_argument("revision_b", metavar="B", help="the revision to judge, e.g. my-branch or HEAD")
    add_selection_arguments(parser)
    parser.add_argument(
        "--rounds", type=int, default=DEFAULT_ROUNDS, help=f"runs of each side, interleaved (default {DEFAULT_ROUNDS})"
    )
    parser.add_argument(
        "--repeat-budget",
        type=float,
        metavar="S",
        help="seconds of timed repeats per measurement and round (default 0.2 on CPU, 1.0 on CUDA)",
    )
    parser.add_argument(
        "--min-effect",
        type=float,
        default=0.05,
        metavar="FRACTION",
        help="smallest change of the median reported as faster/slower (default 0.05: 5%%)",
    )
    parser.add_argument(
        "--alpha",
        type=float,
        default=0.01,
        help="1 - the confidence of the interval that decides (default 0.01: a 99%% interval)",
    )
    parser.add_argument(
        "--no-segments",
        action="store_true",
        help="do not profile nvFuser's kernels per fusion in the first round (GPU; faster, reasons without segments)",
    )
    parser.add_argument("--repo", type=Path, metavar="DIR", help="the git repository (default: the current folder)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write raw samples and verdicts to PATH")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Runs the comparison and prints the table; 1 when anything regressed."""
    selection = selection_from_args(args)
    check(args.rounds >= 1, lambda: f"--rounds {args.rounds}: expected at least 1 round")
    budget = args.repeat_budget if args.repeat_budget is not None else DEFAULT_BUDGET_S[selection.device.type]
    check(budget > 0, lambda: f"--repeat-budget {budget:g}: expected a positive number of seconds")
    check(0 < args.alpha < 1, lambda: f"--alpha {args.alpha:g}: expected a probability strictly between 0 and 1")
    check(args.min_effect >= 0, lambda: f"--min-effect {args.min_effect:g}: expected a fraction >= 0, like 0.05")
    settings = DecisionSettings(min_effect=args.min_effect, alpha=args.alpha)
    repo = repository_root(args.repo or Path.cwd())
    commits = resolve_commit(repo, args.revision_a), resolve_commit(repo, args.revision_b)
    run_args = child_run_arguments(selection, budget, segments=not args.no_segments)
    size = "quick sizes" if selection.quick else "full sizes"
    _report(
        f"A = {args.revision_a} ({commits[0][:8]}), B = {args.revision_b} ({commits[1][:8]}) in {repo}; "
        f"{args.rounds} interleaved rounds on {selection.device} ({size}), {budget:g} s of repeats each"
    )
    with terminate_as_interrupt(), temporary_worktrees(repo, commits) as worktrees:
        sides = (
            Side("A", args.revision_a, commits[0], worktrees[0]),
            Side("B", args.revision_b, commits[1], worktrees[1]),
        )
        with tempfile.TemporaryDirectory(prefix="fusebench-compare-") as scratch:
            runs = interleaved_rounds(sides, run_args, Path(scratch), args.rounds, _report)
            comparisons = compare_runs(runs["A"], runs["B"], settings)
            explain_changes(comparisons)  # NOTE: while the rounds' compiler records still exist
    if not comparisons:
        crashes = [run.error for side_runs in runs.values() for run in side_runs if run.error]
        raise FusebenchError(f"neither side measured anything; the first run said: {crashes[0] if crashes else '?'}")
    print(render(comparisons))
    regressed = [c for c in comparisons if c.regressed]
    print(f"\n{summary_line(comparisons)}: " + (f"{len(regressed)} regressed" if regressed else "no regression"))
    advice = noisy_advice(comparisons)
    if advice:
        print(advice)
    if args.json:
        header = {
            "a": {"revision": args.revision_a, "commit": commits[0]},
            "b": {"revision": args.revision_b, "commit": commits[1]},
            "device": str(selection.device),
            "quick": selection.quick,
            "rounds": args.rounds,
            "repeat_budget_s": budget,
            "settings": {"min_effect": settings.min_effect, "alpha": settings.alpha, "confidence": settings.confidence},
            "runs": {label: [_run_entry(r) for r in side_runs] for label, side_runs in runs.items()},
        }
        atomic_write_json(args.json, comparison_document(comparisons, header), indent=2)
        print(f"json: {args.json}")
    return 1 if regressed else 0


def child_run_arguments(selection: Selection, budget: float, segments: bool = True) -> list[str]:
    """The `fusebench run` flags that select the same measurements on each side (`segments`:
    whether the first round profiles nvFuser's kernels per fusion for its records)."""
    arguments = ["--device", selection.device.type, "--quick" if selection.quick else "--full"]
    arguments += ["--repeat-budget", repr(budget)] + ([] if segments else ["--no-segments"])
    for name in selection.suites:
        arguments += ["--suite", name]
    for pattern in selection.patterns:
        arguments += ["-k", pattern]
    for variant in selection.variants:
        arguments += ["--variant", variant]
    for folder in selection.suite_dirs:
        arguments += ["--suites", str(Path(folder).resolve())]
    return arguments


def _run_entry(run: SideRun) -> dict:
    return {"round": run.round, "returncode": run.returncode, "seconds": run.seconds, "error": run.error}


def _report(message: str) -> None:
    print(f"fusebench compare: {message}" if not message.startswith("  ") else message, file=sys.stderr, flush=True)
