"""`fusebench run`: measure the selected cases and variants, record them, print a summary table
and, per (case, params), how our compiler compares with its fastest peer (`report/summary.py`).

Each measurement is merged into the ASV result file of this machine, commit and environment as
soon as it is done (atomically, under a lock), so an interrupted run keeps what it measured and
never damages the history; what our compiler did for it goes next to the results
(`fusebench.history.artifacts`; `--no-artifacts` turns that off). Measurements run in this
process, or with `--isolate` (the default on CUDA) / `--devices` in worker processes
(`fusebench.measure.workers`): one per device, a crash marking only its unit `crashed`.
Exits 1 when a variant disagreed with the reference, errored or crashed, 0 otherwise (skipped and
unsupported variants are expected, not failures).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch

import fusebench
from fusebench.cases.discovery import discover, suite_roots
from fusebench.cases.selection import (
    Selection,
    add_selection_arguments,
    add_shard_argument,
    pairs_from_environment,
    plan,
    plan_size,
    selection_from_args,
    shard_of,
    variant_notes,
)
from fusebench.commands.compare import child_run_arguments
from fusebench.commands.peer_reuse import Done, measure_reusing_peers
from fusebench.commands.run_units import NOT_STARTED, in_process, not_started, run_json, serve
from fusebench.commands.run_workers import measure_in_workers
from fusebench.errors import FusebenchError, check
from fusebench.files import atomic_write_json
from fusebench.history.durations import FILE_NAME as DURATIONS_FILE
from fusebench.history.durations import Durations, unit_key
from fusebench.history.peer_cache import FILE_NAME as PEER_CACHE_FILE
from fusebench.history.peer_cache import REUSE_ENV, PeerCache, fingerprint
from fusebench.history.results import RunInfo, result_path
from fusebench.history.revision import UNKNOWN_COMMIT, code_revision, commit_revision
from fusebench.measure.bandwidth import peak_bandwidth_gbs
from fusebench.measure.machine import env_name, machine_info
from fusebench.measure.measure import Settings
from fusebench.measure.noise import run_noise
from fusebench.measure.outcome import BAD_STATUSES, Outcome
from fusebench.measure.paired import paired_wanted
from fusebench.measure.precision import DEFAULT_PRECISION, PRECISION_ENV, checked_precision
from fusebench.measure.threads import add_threads_argument, checked_threads
from fusebench.measure.turns import turns_supported
from fusebench.measure.workers import (
    WORKER_CPUS,
    available_cpus,
    default_jobs,
    devices_from,
)
from fusebench.report.dashboard import case_modes, dashboard, measurements_from_outcomes, render_dashboard
from fusebench.report.fallbacks import render_fallbacks
from fusebench.report.overhead import render_overhead
from fusebench.report.progress import Progress
from fusebench.report.scoreboard import rows_from_outcomes
from fusebench.report.summary import render_summary
from fusebench.report.table import format_seconds, render

DEFAULT_BUDGET_S = {"cpu": 0.2, "cuda": 1.0}
DEFAULT_UNIT_TIMEOUT_S = 120.0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Registers `run`."""
    parser = subparsers.add_parser(
        "run",
        help="measure cases and record results (ASV format)",
        description="Measures the selected cases and variants and records them in ASV's result format. "
        "View them with `fusebench report`, or with ASV: `asv publish`, then `asv preview` (ASV's pages "
        "load their data over HTTP, so opening html/index.html as a file does not work).",
    )
    add_selection_arguments(parser)
    add_shard_argument(parser)
    parser.add_argument(
        "--repeat-budget",
        type=float,
        metavar="S",
        help=f"seconds of timed repeats per measurement (default {DEFAULT_BUDGET_S['cpu']} on CPU, "
        f"{DEFAULT_BUDGET_S['cuda']} on CUDA; the cap when --precision stops sooner)",
    )
    parser.add_argument(
        "--precision",
        type=float,
        metavar="FRACTION",
        help="stop a measurement's repeats once its median's 95%% interval is within this fraction of it "
        f"(default {DEFAULT_PRECISION:g}, or ${PRECISION_ENV}; 0: always spend the whole --repeat-budget)",
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write this run's measurements to PATH")
    parser.add_argument("--results", type=Path, default=Path("results"), metavar="DIR", help="default: ./results")
    parser.add_argument("--machine", metavar="NAME", help="machine name in the results (default: the host name)")
    parser.add_argument(
        "--commit", metavar="HASH", help="record under this commit (default: HEAD of the code under test's git tree)"
    )
    parser.add_argument(
        "--devices",
        metavar="LIST",
        help="measure in one worker process per device and merge the results: cuda:0,cuda:1 / all / cpu,cpu",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        metavar="N",
        help="worker processes per GPU (default: one per 4 CPUs and 20 GiB of GPU memory, at most 4; 1 with "
        "--no-isolate): they compile and check results at once, each on its own "
        "share of the CPUs, and take turns on the GPU for inputs, warm-up, timed repeats and kernel "
        "counts, the others stopped while one's timed repeats run; a run takes a fraction of one "
        "worker's time",
    )
    parser.add_argument(
        "--isolate",
        action=argparse.BooleanOptionalAction,
        help="measure in a worker process, so a crash marks one measurement `crashed` (default: on for CUDA)",
    )
    parser.add_argument(
        "--time-limit",
        type=float,
        default=0.0,
        metavar="S",
        help="start no measurement after S seconds of the run: the summary covers those measured, the rest are "
        "listed as not started (0: no limit, the default)",
    )
    parser.add_argument(
        "--unit-timeout",
        type=float,
        default=DEFAULT_UNIT_TIMEOUT_S,
        metavar="S",
        help=f"stop a measurement still running after S seconds and go on with a fresh worker (where "
        f"measurements run in workers: CUDA, --isolate, --devices; 0: no limit; default {DEFAULT_UNIT_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--no-artifacts", action="store_true", help="do not record traces and fusion definitions next to the results"
    )
    parser.add_argument(
        "--no-segments", action="store_true", help="do not profile nvFuser's kernels per fusion for the record (GPU)"
    )
    parser.add_argument(
        "--no-paired",
        action="store_true",
        help="do not time fusebench and each peer measured beside it alternately for the verdict "
        "(fusebench.measure.paired): faster, but the verdict is then the ratio of two separate measurements",
    )
    parser.add_argument(
        "--profile-overhead",
        action="store_true",
        help="print where each measurement's time went beyond compile time and the repeat budget",
    )
    parser.add_argument(
        "--remeasure-peers",
        action="store_true",
        help="measure every peer again (default: reuse a peer's earlier measurement on this machine where "
        "nothing it depends on changed and the case's eager time is as it was; see fusebench.history.peer_cache)",
    )
    add_threads_argument(parser)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--outcomes-fd", type=int, help=argparse.SUPPRESS)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Measures every selected (case, params, variant) and prints the summary table."""
    started = time.perf_counter()
    torch.set_num_threads(checked_threads(args.threads))
    selection = dataclasses.replace(selection_from_args(args), pairs=pairs_from_environment())
    budget = args.repeat_budget if args.repeat_budget is not None else DEFAULT_BUDGET_S[selection.device.type]
    check(budget > 0, lambda: f"--repeat-budget {budget:g}: expected a positive number of seconds", FusebenchError)
    for flag, seconds in (("--unit-timeout", args.unit_timeout), ("--time-limit", args.time_limit)):
        check(
            math.isfinite(seconds) and seconds >= 0,
            lambda flag=flag, seconds=seconds: f"{flag} {seconds:g}: expected seconds >= 0 (0: no limit)",
            FusebenchError,
        )
    precision = checked_precision(args.precision)
    jobs = _jobs(args, selection)
    turns = Path(tempfile.mkdtemp(prefix="fusebench-turns-")) if jobs > 1 else None  # the GPUs' lock files
    try:
        return _run(args, selection, budget, precision, jobs, turns, started)
    finally:
        if turns is not None:
            shutil.rmtree(turns, ignore_errors=True)


def _run(
    args: argparse.Namespace,
    selection: Selection,
    budget: float,
    precision: float,
    jobs: int,
    turns: Path | None,
    started: float,
) -> int:
    devices = _devices(args.devices, jobs, turns) if args.devices else None
    suites = discover(selection.suite_dirs)
    groups = plan(suites, dataclasses.replace(selection, shard=None))
    check(groups, lambda: "the selection flags selected nothing (see `fusebench list` with the same flags)")
    unsharded, groups = len(groups), shard_of(groups, selection.shard)
    machine = machine_info(args.machine)
    revision = code_revision() if args.commit is None else commit_revision(args.commit)
    run_info = RunInfo(machine, revision, env_name(machine, str(selection.device)))
    units = [(group, variant) for group in groups for variant in group.variants]
    peak = peak_bandwidth_gbs(selection.device)
    if args.worker:
        return serve(args, units, run_info, _settings(args, selection.device, budget, peak, precision))
    deadline = started + args.time_limit if args.time_limit else None
    size = "quick sizes" if selection.quick else "full sizes"
    dirty = " (dirty)" if revision.dirty else ""
    repeats = f"up to {budget:g} s of repeats each (less once the median is known to {precision * 100:g}%)"
    repeats = repeats if precision > 0 else f"{budget:g} s of repeats each"
    print(
        f"fusebench run: {len(units)} measurements{_more_with_all(suites, selection, len(units))} on "
        f"{args.devices or selection.device} ({size}), {repeats}; peak bandwidth {peak:.1f} GB/s; "
        f"commit {revision.commit[:8]}{dirty}",
        file=sys.stderr,
    )
    if selection.shard:
        print(
            f"fusebench run: shard {selection.shard[0]}/{selection.shard[1]}: {len(groups)} of the {unsharded} "
            "(case, params) selected",
            file=sys.stderr,
        )
    for note in variant_notes(suites, selection):
        print(f"fusebench run: {note}", file=sys.stderr)
    if revision.commit == UNKNOWN_COMMIT:
        print("fusebench run: not in a git work tree: results are recorded under commit 00000000", file=sys.stderr)
    isolate = args.isolate if args.isolate is not None else selection.device.type == "cuda"
    durations = Durations(
        args.results / machine.machine / DURATIONS_FILE,
        [unit_key(group.case_id, variant.name, selection.device.type, selection.quick) for group, variant in units],
    )
    if args.devices or isolate or jobs > 1:
        devices = devices or _devices("cuda:0" if selection.device.type == "cuda" else "cpu", jobs, turns)
        shares = [device.env[WORKER_CPUS].count(",") + 1 for device in devices if WORKER_CPUS in device.env]
        if shares:
            print(
                f"fusebench run: {len(devices)} workers, each on its own {min(shares)}-{max(shares)} CPUs "
                "(one's compiles do not take another's CPU time)"
                + (
                    f"; {jobs} per GPU (--jobs), taking turns on it for all that is timed, the others stopped while "
                    "one's timed repeats run"
                    if jobs > 1
                    else ""
                ),
                file=sys.stderr,
            )
        worker_args = [*child_run_arguments(selection, budget), *_record_arguments(args, revision.commit)]

        def measure(indices: list[int], done: Done) -> dict[int, Outcome]:
            progress = Progress(len(indices), expected=durations.expected(indices))
            return measure_in_workers(
                args, units, run_info, devices, worker_args, indices, durations.watching(done), progress, deadline
            )
    else:
        settings = _settings(args, selection.device, budget, peak, precision)

        def measure(indices: list[int], done: Done) -> dict[int, Outcome]:
            progress = Progress(len(indices), expected=durations.expected(indices))
            return in_process(args, units, run_info, settings, indices, durations.watching(done), progress, deadline)

    cache = PeerCache(
        args.results / machine.machine / PEER_CACHE_FILE,
        fingerprint(
            machine,
            {"device": str(selection.device), "quick": selection.quick, "budget": budget, "precision": precision},
            [Path(fusebench.__file__).parent, *suite_roots(selection.suite_dirs)],
        ),
    )
    try:
        outcomes = measure_reusing_peers(
            units,
            run_info,
            cache,
            measure,
            args.results,
            reuse=not args.remeasure_peers and os.environ.get(REUSE_ENV, "1") != "0",
            unit_timeout_s=args.unit_timeout or None,
            not_measured=(lambda i: not_started(units[i], str(selection.device), args.time_limit))
            if args.time_limit
            else None,
        )
    finally:
        durations.keep()
    took = format_seconds(time.perf_counter() - started)
    where = args.devices or selection.device
    left = sum(o.detail.startswith(NOT_STARTED) for o in outcomes)
    print(f"fusebench run: {len(units) - left} measurements done in {took} on {where}", file=sys.stderr)
    if left:
        print(f"fusebench run: --time-limit {args.time_limit:g} s: {left} measurements not started", file=sys.stderr)
    print(render(outcomes))
    print(f"\nresults: {result_path(args.results, run_info)}")
    if args.json:
        atomic_write_json(args.json, run_json(run_info, selection.quick, outcomes), indent=2)
        print(f"json: {args.json}")
    headline = render_dashboard(dashboard(measurements_from_outcomes(outcomes, case_modes(suites))))
    if headline:
        print(f"\n{headline}")
    summary = render_summary(rows_from_outcomes(outcomes))
    if summary:
        print(f"\n{summary}")
    fell_back = render_fallbacks(outcomes)
    if fell_back:
        print(f"\n{fell_back}")
    if args.profile_overhead:
        workers = len(devices) if (args.devices or isolate) and devices else 1
        print(f"\n{render_overhead(outcomes, time.perf_counter() - started, workers)}")
    noise = run_noise(outcomes).line()
    if noise:
        print(noise)
    return 1 if any(o.status in BAD_STATUSES for o in outcomes) else 0


def _more_with_all(suites: list, selection: Selection, measured: int) -> str:
    """' (each case's headline; --all: 913 more)', or '' when the selection measures everything."""
    if selection.everything:
        return ""
    everything = plan_size(plan(suites, dataclasses.replace(selection, everything=True)))
    if everything <= measured:
        return ""
    return f" (each case's headline; --all: {everything - measured} more)"


def _devices(spec: str, jobs: int, turns: Path | None) -> list:
    """The worker devices `--devices spec` names, `jobs` per GPU (a FusebenchError naming the flag otherwise)."""
    try:
        return devices_from(spec, torch.cuda.device_count(), jobs, turns)
    except ValueError as error:
        raise FusebenchError(str(error)) from error


def _jobs(args: argparse.Namespace, selection: Selection) -> int:
    """Workers per GPU: `--jobs`, else as many as the host's CPUs and the GPU's memory allow
    (`default_jobs`) where measurements run in workers on CUDA, else 1."""
    if args.jobs is None:
        unshared = args.isolate is False or args.worker or not turns_supported()
        if unshared or selection.device.type != "cuda" or not torch.cuda.is_available():
            return 1
        spec = args.devices or "cuda:0"
        gpus = torch.cuda.device_count() if spec == "all" else spec.count("cuda")
        return default_jobs(len(available_cpus()), gpus, torch.cuda.get_device_properties(0).total_memory)
    jobs = args.jobs
    check(
        jobs >= 1 and (jobs == 1 or selection.device.type == "cuda"),
        lambda: f"--jobs {jobs}: expected at least 1 worker per GPU (on CPU: 1; use --devices cpu,cpu)",
        FusebenchError,
    )
    return jobs


def _settings(args: argparse.Namespace, device: torch.device, budget: float, peak: float, precision: float) -> Settings:
    record = not args.no_artifacts
    segments = record and device.type == "cuda" and not args.no_segments
    return Settings(
        device=device,
        budget_s=budget,
        peak_bandwidth_gbs=peak,
        record=record,
        segments=segments,
        precision=precision,
        paired=paired_wanted(args.no_paired),
    )


def _record_arguments(args: argparse.Namespace, commit: str) -> list[str]:
    """The flags that make every worker record where and as this run does."""
    arguments = ["--results", str(args.results.resolve()), "--commit", commit]
    arguments += ["--machine", args.machine] if args.machine else []
    arguments += ["--no-artifacts"] if args.no_artifacts else []
    arguments += [f"--shard={args.shard[0]}/{args.shard[1]}"] if args.shard else []
    arguments += ["--threads", str(checked_threads(args.threads))]
    arguments += ["--precision", repr(checked_precision(args.precision))]
    arguments += ["--no-paired"] if args.no_paired else []
    return arguments + (["--no-segments"] if args.no_segments else [])
