"""`fusebench run`: measure the selected cases and variants, record them, print a summary table.

Each measurement is merged into the ASV result file of this machine, commit and environment as
soon as it is done (atomically), so an interrupted run keeps what it measured and never damages
the history. Exits 1 when a variant disagreed with the reference or errored, 0 otherwise
(skipped and unsupported variants are expected, not failures).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import torch

from fusebench.cases.discovery import discover
from fusebench.cases.selection import add_selection_arguments, plan, selection_from_args
from fusebench.errors import FusebenchError, check
from fusebench.files import atomic_write_json
from fusebench.history.results import RunInfo, write_outcomes
from fusebench.history.revision import UNKNOWN_COMMIT, code_revision, commit_revision
from fusebench.measure.bandwidth import peak_bandwidth_gbs
from fusebench.measure.machine import env_name, machine_info
from fusebench.measure.measure import Settings, measure_variant, prepare_case
from fusebench.measure.outcome import Outcome
from fusebench.report.progress import Progress
from fusebench.report.table import render

DEFAULT_BUDGET_S = {"cpu": 0.2, "cuda": 1.0}


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Registers `run`."""
    parser = subparsers.add_parser("run", help="measure cases and record results (ASV format)")
    add_selection_arguments(parser)
    parser.add_argument(
        "--repeat-budget",
        type=float,
        metavar="S",
        help=f"seconds of timed repeats per measurement (default {DEFAULT_BUDGET_S['cpu']} on CPU, "
        f"{DEFAULT_BUDGET_S['cuda']} on CUDA)",
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write this run's measurements to PATH")
    parser.add_argument("--results", type=Path, default=Path("results"), metavar="DIR", help="default: ./results")
    parser.add_argument("--machine", metavar="NAME", help="machine name in the results (default: the host name)")
    parser.add_argument(
        "--commit", metavar="HASH", help="record under this commit (default: HEAD of the code under test's git tree)"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Measures every selected (case, params, variant) and prints the summary table."""
    selection = selection_from_args(args)
    groups = plan(discover(selection.suite_dirs), selection)
    check(groups, lambda: "the selection flags selected nothing (see `fusebench list` with the same flags)")
    budget = args.repeat_budget if args.repeat_budget is not None else DEFAULT_BUDGET_S[selection.device.type]
    check(budget > 0, lambda: f"--repeat-budget {budget}: expected a positive number of seconds", FusebenchError)
    machine = machine_info(args.machine)
    revision = code_revision() if args.commit is None else commit_revision(args.commit)
    run_info = RunInfo(machine, revision, env_name(machine, str(selection.device)))
    peak = peak_bandwidth_gbs(selection.device)
    settings = Settings(device=selection.device, budget_s=budget, peak_bandwidth_gbs=peak)
    total = sum(len(g.variants) for g in groups)
    size = "quick sizes" if selection.quick else "full sizes"
    print(
        f"fusebench run: {total} measurements on {selection.device} ({size}), {budget:g} s of repeats each; "
        f"peak bandwidth {peak:.1f} GB/s; commit {revision.commit[:8]}{' (dirty)' if revision.dirty else ''}",
        file=sys.stderr,
    )
    if revision.commit == UNKNOWN_COMMIT:
        print("fusebench run: not in a git work tree: results are recorded under commit 00000000", file=sys.stderr)
    progress = Progress(total)
    outcomes: list[Outcome] = []
    path = None
    for group in groups:
        prepared = prepare_case(group.suite.name, group.case, group.params, settings)
        for variant in group.variants:
            progress.start(group.case_id, variant.name)
            outcome = measure_variant(prepared, variant, settings)
            progress.finish(outcome)
            outcomes.append(outcome)
            path = write_outcomes(args.results, run_info, [outcome])
        del prepared
        if selection.device.type == "cuda":
            torch.cuda.empty_cache()
    print(render(outcomes))
    print(f"\nresults: {path}")
    if args.json:
        atomic_write_json(args.json, _run_json(run_info, selection.quick, outcomes), indent=2)
        print(f"json: {args.json}")
    return 1 if any(o.status in ("failed", "error") for o in outcomes) else 0


def _run_json(run_info: RunInfo, quick: bool, outcomes: list[Outcome]) -> dict:
    return {
        "machine": run_info.machine.as_json(),
        "commit": run_info.revision.commit,
        "env_name": run_info.env_name,
        "quick": quick,
        "outcomes": [dataclasses.asdict(o) for o in outcomes],
    }
