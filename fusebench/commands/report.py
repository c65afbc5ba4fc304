"""`fusebench report`: one self-contained HTML file of the histories, regressions and a comparison.

    fusebench report [--results DIR] [--merge DIR ...] [--compare JSON] [--baseline VARIANT] [--suites DIR]
                     [-o report.html]
    fusebench report [--results DIR] [--merge DIR ...] --markdown RESULTS.md

Reads the ASV results folder (`fusebench run` and `asv run` histories), finds step changes for
the worse (`fusebench.history.regressions`), and lays out the charts (`fusebench.report.report`).
With `--merge DIR` (repeatable), the results folders of other machines or of the other shards of
a `fusebench run --shard I/N` are first merged into `--results` (`fusebench.history.merge`), which
then holds them all, for the report and for `asv publish`. The dashboard gives a suite whose cases
name a mode (inference, training, decode) a row per mode; results files keep no case metadata, so
the modes are read from the bundled suites, and from the folders `--suites DIR` names (as `run
--suites DIR` measured them). The flagged
regressions are also printed. The file embeds plotly.js, so it opens offline; it is written
atomically. With `--markdown PATH` it writes the latest tables per machine as a Markdown page
instead (`fusebench.report.markdown`). It also merges fusebench's machine facts back into each
machine.json that `asv run` rewrote (`fusebench.history.machine_file`), so `asv publish` shows them.

ASV's own site of the same results: `asv publish` writes html/, which must be served, not opened
as a file (its pages load their data over HTTP): `asv preview` serves it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from fusebench.cases.discovery import discover
from fusebench.errors import check
from fusebench.history.machine_file import restore_machine_facts
from fusebench.history.merge import merge_results
from fusebench.report.dashboard import bundled_modes, case_modes
from fusebench.report.markdown import write_markdown
from fusebench.report.report import load_inputs, write_report
from fusebench.report.table import counted


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Registers `report`."""
    parser = subparsers.add_parser(
        "report",
        help="write an HTML report of histories, regressions and a comparison",
        description="Writes one self-contained HTML report of the results folder. ASV's own site of the same "
        "results: run `asv publish`, then view it with `asv preview` (its pages load their data over HTTP, "
        "so opening html/index.html as a file does not work).",
    )
    parser.add_argument("--results", type=Path, default=Path("results"), metavar="DIR", help="default: ./results")
    parser.add_argument(
        "--merge",
        type=Path,
        action="append",
        default=[],
        metavar="DIR",
        help="first merge the results folder DIR (another machine's or `run --shard`'s) into --results (repeatable)",
    )
    parser.add_argument("--compare", type=Path, metavar="JSON", help="a `fusebench compare --json` document")
    parser.add_argument(
        "-o", "--output", type=Path, default=Path("report.html"), metavar="PATH", help="default: report.html"
    )
    parser.add_argument(
        "--threshold",
        type=float,
        default=0.05,
        metavar="FRACTION",
        help="smallest step reported as a regression (default 0.05: 5%%)",
    )
    parser.add_argument("--title", default="fusebench report", help="the page title")
    parser.add_argument(
        "--suites",
        dest="suite_dirs",
        action="append",
        default=[],
        metavar="DIR",
        help="the suites in DIR (as `run --suites DIR`) name their cases' modes for the dashboard (repeatable)",
    )
    parser.add_argument(
        "--baseline",
        metavar="VARIANT",
        help="the scoreboard's ratios are to this variant (eager, torch.compile, ...); default: the fastest",
    )
    parser.add_argument(
        "--markdown",
        type=Path,
        metavar="PATH",
        help="instead of the HTML report, write the latest tables per machine (facts, commit) as Markdown to PATH",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Writes the report; prints the flagged regressions and the path."""
    check(args.threshold >= 0, lambda: f"--threshold {args.threshold:g}: expected a fraction >= 0, like 0.05")
    for folder in args.merge:
        check(folder.is_dir(), lambda folder=folder: f"--merge {folder}: no such results folder")
        merged = merge_results(folder, args.results)
        print(f"merged {counted(len(merged), 'result file')} of {folder} into {args.results}")
    restore_machine_facts(args.results)
    if args.markdown is not None:
        print(f"results page: {write_markdown(args.results, args.markdown)}")
        return 0
    inputs = load_inputs(args.results, args.compare, args.threshold, args.baseline)
    if args.suite_dirs:
        inputs.modes = {**bundled_modes(), **case_modes(discover(args.suite_dirs))}
    path = write_report(inputs, args.output, args.title)
    for regression in inputs.regressions:
        change = "from 0" if regression.value_before == 0 else f"+{100 * regression.change:.1f}%"
        print(
            f"regression: {regression.suite}.{regression.case}({regression.params}) {regression.variant} "
            f"{regression.metric} {change} in {regression.commit_range} ({regression.machine}/{regression.env})"
        )
    commits = inputs.frame.commit.nunique() if not inputs.frame.empty else 0
    flagged = counted(len(inputs.regressions), "regression")
    print(f"{flagged} flagged over {counted(commits, 'commit')}; report: {path}")
    return 0
