"""`fusebench report`: one self-contained HTML file of the histories, regressions and a comparison.

    fusebench report [--results DIR] [--compare JSON] [--baseline VARIANT] [-o report.html]
    fusebench report [--results DIR] --markdown RESULTS.md

Reads the ASV results folder (`fusebench run` and `asv run` histories), finds step changes for
the worse (`fusebench.history.regressions`), and lays out the charts (`fusebench.report.report`). The flagged
regressions are also printed. The file embeds plotly.js, so it opens offline; it is written
atomically. With `--markdown PATH` it writes the latest tables per machine as a Markdown page
instead (`fusebench.report.markdown`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from fusebench.errors import check
from fusebench.report.markdown import write_markdown
from fusebench.report.report import load_inputs, write_report
from fusebench.report.table import counted


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Registers `report`."""
    parser = subparsers.add_parser("report", help="write an HTML report of histories, regressions and a comparison")
    parser.add_argument("--results", type=Path, default=Path("results"), metavar="DIR", help="default: ./results")
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
    if args.markdown is not None:
        print(f"results page: {write_markdown(args.results, args.markdown)}")
        return 0
    inputs = load_inputs(args.results, args.compare, args.threshold, args.baseline)
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
