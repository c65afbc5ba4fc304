"""`fusebench compare A B`: is revision B faster or slower than revision A, benchmark by benchmark?

Both revisions are checked out into temporary git worktrees (removed again whatever happens),
and each side's own `fusebench run` measures the selected cases in its own process, with this
interpreter and its installed packages, over several rounds that alternate which side goes first
(`fusebench.compare.interleave`). Per benchmark, every sample of every round decides: a
hierarchical bootstrap (rounds, then samples within rounds) gives the interval of the ratio B/A of
the rounds' geometric-mean lower quartiles (`--quantile`), and the verdict says whether it lies
beyond the minimum effect (slower, faster), within it (no change) or across its edge (noisy, with
the rounds that would decide) (`fusebench.compare.decide`, docs/verdicts.md); rows still noisy
get follow-up rounds of their own up to `--max-rounds` (`fusebench.compare.followup`); the table is
`fusebench.compare.comparison`. Progress goes to
stderr, the table to stdout. Exit status: 1 when a benchmark got slower or fails at B, 0 otherwise
(2 for bad arguments).
"""

from __future__ import annotations

import argparse
import functools
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fusebench.cases.selection import Selection, add_selection_arguments, selection_from_args
from fusebench.compare.arguments import CompareOptions, add_decision_arguments, options_from_args
from fusebench.compare.comparison import (
    BenchmarkComparison,
    compare_runs,
    comparison_document,
    explain_changes,
    noisy_advice,
    render,
    summary_line,
)
from fusebench.compare.followup import follow_up
from fusebench.compare.interleave import Side, SideRun, interleaved_rounds
from fusebench.compare.worktree import repository_root, resolve_commit, temporary_worktrees, terminate_as_interrupt
from fusebench.errors import FusebenchError
from fusebench.files import atomic_write_json
from fusebench.measure.noise import Noise, is_control, machine_noise, relative_spread, round_drift, slow_tail
from fusebench.measure.precision import PRECISION_ENV
from fusebench.measure.stats import summarize
from fusebench.measure.threads import THREADS_ENV


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) during a comparison; `kept` says what was kept and where."""

    def __init__(self, kept: str) -> None:
        super().__init__(kept)
        self.kept = kept


@dataclass
class Measured:
    """Both sides' runs and the comparisons decided from them."""

    runs: dict[str, list[SideRun]]
    comparisons: list[BenchmarkComparison]


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Registers `compare`."""
    parser = subparsers.add_parser(
        "compare", help="compare two git revisions benchmark by benchmark; exit 1 on a regression"
    )
    parser.add_argument("revision_a", metavar="A", help="the baseline revision (branch, tag, commit), e.g. main")
    parser.add_argument("revision_b", metavar="B", help="the revision to judge, e.g. my-branch or HEAD")
    add_selection_arguments(parser)
    add_decision_arguments(parser)
    parser.add_argument("--json", type=Path, metavar="PATH", help="write raw samples and verdicts to PATH")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Runs the comparison and prints the table; 1 when anything regressed."""
    selection = selection_from_args(args)
    options = options_from_args(args, selection)
    repo = repository_root(args.repo or Path.cwd())
    commits = resolve_commit(repo, args.revision_a), resolve_commit(repo, args.revision_b)
    names = (args.revision_a, args.revision_b)
    size = "quick sizes" if selection.quick else "full sizes"
    _report(
        f"A = {args.revision_a} ({commits[0][:8]}), B = {args.revision_b} ({commits[1][:8]}) in {repo}; "
        f"{options.rounds} interleaved rounds (noisy rows: up to {options.schedule.looks[-1]}) on {selection.device} "
        f"({size}), {options.budget_s:g} s of repeats each, {options.threads} thread(s)"
    )
    header = compare_header(names, commits, selection, options)
    kept_at = args.json or Path.cwd() / f"fusebench-compare-{commits[0][:8]}-{commits[1][:8]}-interrupted.json"
    measured = measure_revisions(repo, names, commits, selection, options, kept_at, header)
    comparisons = measured.comparisons
    print(render(comparisons))
    regressed = [c for c in comparisons if c.regressed]
    print(f"\n{summary_line(comparisons)}: " + (f"{len(regressed)} regressed" if regressed else "no regression"))
    for line in (noisy_advice(comparisons), comparison_noise(comparisons).line()):
        if line:
            print(line)
    if args.json:
        atomic_write_json(args.json, compare_document(comparisons, header, measured.runs), indent=2)
        print(f"json: {args.json}")
    return 1 if regressed else 0


def measure_revisions(
    repo: Path,
    names: tuple[str, str],
    commits: tuple[str, str],
    selection: Selection,
    options: CompareOptions,
    kept_at: Path,
    header: dict[str, Any],
) -> Measured:
    """Measures both commits in interleaved rounds and decides every benchmark. Interrupted (Ctrl-C,
    SIGTERM), it writes the rounds both sides finished to `kept_at` (a compare document) and raises
    `Interrupted` saying so, or saying that nothing is kept."""
    run_args = child_run_arguments(selection, options.budget_s, segments=options.segments, repo=repo)
    # NOTE: every round spends its whole budget (the rule that stops once one run's median is
    # precise would leave fewer samples to judge between rounds); an environment variable, so that
    # a side older than `--precision` runs too.
    environment = {THREADS_ENV: str(options.threads), PRECISION_ENV: "0"}
    runs: dict[str, list[SideRun]] = {}
    with terminate_as_interrupt(), temporary_worktrees(repo, commits) as worktrees:
        sides = (Side("A", names[0], commits[0], worktrees[0]), Side("B", names[1], commits[1], worktrees[1]))
        with tempfile.TemporaryDirectory(prefix="fusebench-compare-") as scratch:
            try:
                interleaved_rounds(sides, run_args, Path(scratch), options.rounds, _report, environment, runs)
                narrowed_args = functools.partial(
                    child_run_arguments, budget=options.budget_s, segments=False, repo=repo
                )
                schedule, settings = options.schedule, options.settings
                follow_up(
                    sides, selection, narrowed_args, Path(scratch), schedule, settings, _report, environment, runs
                )
            except KeyboardInterrupt:
                raise Interrupted(keep_interrupted(runs, options, header, kept_at)) from None
            comparisons = compare_runs(runs["A"], runs["B"], options.settings, options.schedule)
            explain_changes(comparisons)  # NOTE: while the rounds' compiler records still exist
    if not comparisons:
        crashes = [run.error for side_runs in runs.values() for run in side_runs if run.error]
        raise FusebenchError(f"neither side measured anything; the first run said: {crashes[0] if crashes else '?'}")
    return Measured(runs, comparisons)


def keep_interrupted(
    runs: dict[str, list[SideRun]], options: CompareOptions, header: dict[str, Any], path: Path
) -> str:
    """Writes the rounds both sides finished before an interruption to `path`, decided as far as they
    go; returns what was kept and where (or that nothing was: no round had finished on both sides)."""
    complete = min((len(runs.get(label, [])) for label in "AB"), default=0)
    if complete == 0:
        return "nothing is kept: no round had finished on both sides"
    kept = {label: runs[label][:complete] for label in "AB"}
    comparisons = compare_runs(kept["A"], kept["B"], options.settings, options.schedule)
    planned = sum(not run.look for run in kept["A"])
    follow_ups = complete - planned
    done = {**header, "interrupted": True, "rounds_done": planned, "follow_up_rounds_done": follow_ups}
    atomic_write_json(path, compare_document(comparisons, done, kept), indent=2)
    more = f" and {follow_ups} follow-up round(s) of the noisy rows" if follow_ups else ""
    return f"the {planned} of {options.rounds} rounds{more} both sides finished are kept in {path}"


def comparison_noise(comparisons: Sequence[BenchmarkComparison]) -> Noise:
    """The machine's noise from the control (eager) rows both sides measured: their samples' spread
    within each round and their round medians' drift on each side."""
    spreads, drifts, tails = [], [], []
    for comparison in comparisons:
        if not is_control(comparison.variant):
            continue
        for side in (comparison.a, comparison.b):
            for samples in side.rounds:
                stats = summarize(samples)
                spreads.append(relative_spread(stats.median, stats.q25, stats.q75))
                tails.append(slow_tail(samples))
            drifts.append(round_drift(side.round_medians))
    return machine_noise(spreads, drifts, tails)


def compare_header(
    names: tuple[str, str], commits: tuple[str, str], selection: Selection, options: CompareOptions
) -> dict[str, Any]:
    """The compare document's description of what was compared, and how."""
    settings = options.settings
    return {
        "a": {"revision": names[0], "commit": commits[0]},
        "b": {"revision": names[1], "commit": commits[1]},
        "device": str(selection.device),
        "quick": selection.quick,
        "rounds": options.rounds,
        "max_rounds": options.schedule.looks[-1],
        "looks": list(options.schedule.looks),
        "look_alphas": [options.schedule.alpha_at(look) for look in range(len(options.schedule.looks))],
        "repeat_budget_s": options.budget_s,
        "threads": options.threads,
        "settings": {
            "min_effect": settings.min_effect,
            "alpha": settings.alpha,
            "confidence": settings.confidence,
            "quantile": settings.quantile,
        },
    }


def compare_document(
    comparisons: Sequence[BenchmarkComparison], header: dict[str, Any], runs: dict[str, list[SideRun]]
) -> dict[str, Any]:
    """The `--json` document: `header`, the machine's noise, each run and every benchmark's samples."""
    noise = comparison_noise(comparisons)
    header = {
        **header,
        "noise": {
            "spread": noise.spread,
            "drift": noise.drift,
            "tail": noise.tail,
            "noisy": noise.noisy,
            "line": noise.line(),
        },
        "runs": {label: [_run_entry(r) for r in side_runs] for label, side_runs in runs.items()},
    }
    return comparison_document(comparisons, header)


def child_run_arguments(
    selection: Selection, budget: float, segments: bool = True, repo: Path | None = None
) -> list[str]:
    """The `fusebench run` flags that select the same measurements on each side (`segments`:
    whether the first round profiles nvFuser's kernels per fusion for its records). A `--suites`
    folder inside `repo` is passed relative to it, so that each side, run in its own checkout of
    `repo`, reads that revision's suites."""
    arguments = ["--device", selection.device.type, "--quick" if selection.quick else "--full"]
    arguments += ["--all"] if selection.everything else []
    arguments += ["--repeat-budget", repr(budget)] + ([] if segments else ["--no-segments"])
    for name in selection.suites:
        arguments += ["--suite", name]
    for pattern in selection.patterns:
        arguments += ["-k", pattern]
    for variant in selection.variants:
        arguments += ["--variant", variant]
    for folder in selection.suite_dirs:
        arguments += ["--suites", _suite_folder(Path(folder).resolve(), repo)]
    return arguments


def _suite_folder(folder: Path, repo: Path | None) -> str:
    if repo is not None and folder.is_relative_to(repo.resolve()):
        return str(folder.relative_to(repo.resolve()))
    return str(folder)


def _run_entry(run: SideRun) -> dict:
    return {"round": run.round, "returncode": run.returncode, "seconds": run.seconds, "error": run.error}


def _report(message: str) -> None:
    print(f"fusebench compare: {message}" if not message.startswith("  ") else message, file=sys.stderr, flush=True)
