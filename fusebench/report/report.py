"""The HTML report: one self-contained file (plotly.js inside) that opens offline in any browser.

Layout, top to bottom:
0. the dashboard headline per machine and environment (`dashboard_chart.py`): per variant and
   suite, pass rate, speedup over eager, compile time and memory ratio, and their history;
1. a summary of flagged regressions: the step changes `fusebench.history.regressions` finds in the
   histories, worst first, with the commit range each appeared in; and, with a compare document,
   the benchmarks that comparison found slower or failing;
2. with results from several machines or environments, a selector that shows one at a time
   (`machines.py`); the scoreboard and suite charts below are per machine and environment;
3. the scoreboard (`scoreboard_chart.py`): the latest time per call of every variant in every
   (suite, case, params), as a heatmap of ratios to the fastest variant or to `baseline`;
4. with a compare document (`fusebench compare --json`): the B/A ratio chart with confidence
   intervals, and the table of benchmarks whose verdict is not "no change";
5. per suite (`suite_charts.py`): time per call with kernels and fusions per call beside it (bars
   of the latest values with one commit, a history per (case, params) with several), the latest
   effective bandwidth as a fraction of the machine's measured peak, and the latest recompilations.
"""

from __future__ import annotations

import datetime
import html
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from fusebench.cases.case import format_params
from fusebench.errors import FusebenchError, check
from fusebench.files import atomic_write_text
from fusebench.history.regressions import Regression, find_regressions
from fusebench.measure.outcome import TIME
from fusebench.report import charts
from fusebench.report.dashboard import Modes
from fusebench.report.dashboard_chart import dashboard_section
from fusebench.report.flagged import flagged_table
from fusebench.report.machines import machine_sections, selector_html
from fusebench.report.noise import noise_html
from fusebench.report.scoreboard_chart import check_baseline, scoreboard_section
from fusebench.report.suite_charts import suite_section
from fusebench.report.table import counted, format_bytes, format_seconds
from fusebench.report.why import why_section


@dataclass
class ReportInputs:
    """What a report shows: results (may be empty), the regressions in them, an optional comparison."""

    frame: pd.DataFrame
    regressions: list[Regression]
    comparison: dict[str, Any] | None = None
    results_dir: str | None = None
    comparison_path: str | None = None
    baseline: str | None = None  # the variant the scoreboard's ratios are taken against (default: the fastest)
    modes: Modes | None = None  # (suite, case) -> the mode the dashboard groups it by (default: the bundled suites')


def build_report(inputs: ReportInputs, title: str = "fusebench report") -> str:
    """The whole HTML document."""
    check(
        not inputs.frame.empty or inputs.comparison is not None,
        lambda: (
            f"nothing to report: no results in {inputs.results_dir} and no compare JSON "
            "(run `fusebench run` or `asv run` first, or pass --compare JSON)"
        ),
    )
    check_baseline(inputs.frame, inputs.baseline)
    figures = _FigureIds()
    sections = machine_sections(inputs.frame)
    colors = charts.variant_colors(inputs.frame.variant)
    parts = [_meta(inputs), selector_html(sections)]
    for section in sections:
        anchor = section.anchor("dashboard")
        dashboard = dashboard_section(section.frame, figures.html, anchor, section.label, colors, inputs.modes)
        parts.append(section.wrap(dashboard))
    parts += [_summary(inputs), why_section(inputs.results_dir, inputs.regressions, inputs.comparison)]
    for section in sections:
        anchor = section.anchor("scoreboard")
        scoreboard = scoreboard_section(section.frame, inputs.baseline, figures.html, anchor, section.label)
        parts.append(section.wrap(scoreboard))
    if inputs.comparison is not None:
        parts.append(_comparison_section(inputs.comparison, figures))
    for section in sections:
        regressions = [r for r in inputs.regressions if (r.machine, r.env) == (section.machine, section.env)]
        suites = [
            suite_section(str(suite), frame, regressions, figures.html, colors, section.anchor(f"suite-{suite}"))
            for suite, frame in section.frame.groupby("suite", sort=True)
        ]
        parts.append(section.wrap("\n".join(suites)))
    template = Template(
        resources.files("fusebench.report").joinpath("templates/report.html").read_text(encoding="utf-8")
    )
    return template.substitute(title=html.escape(title), plotlyjs=get_plotlyjs(), body="\n".join(parts))


def write_report(inputs: ReportInputs, output: str | Path, title: str = "fusebench report") -> Path:
    """Builds the report and writes it atomically to `output` (readable by all, like a web page)."""
    path = atomic_write_text(output, build_report(inputs, title))
    path.chmod(0o644)
    return path


class _FigureIds:
    """Stable, unique div ids for the figures of one page."""

    def __init__(self) -> None:
        self.count = 0

    def html(self, figure: go.Figure) -> str:
        self.count += 1
        div = figure.to_html(
            full_html=False,
            include_plotlyjs=False,
            div_id=f"chart-{self.count}",
            config={"displaylogo": False, "responsive": True},
        )
        return f'<div class="chart">{div}</div>'


def _meta(inputs: ReportInputs) -> str:
    now = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    items = [f"generated {now}"]
    frame = inputs.frame
    if not frame.empty:
        machines = ", ".join(sorted(map(str, frame.machine.unique())))
        commits = counted(frame.commit.nunique(), "commit")
        cases = counted(frame[["suite", "case"]].drop_duplicates().shape[0], "case")
        items.append(
            f"results: <code>{html.escape(str(inputs.results_dir))}</code>, {commits}, {cases}, "
            f"machines: {html.escape(machines)}"
        )
    if inputs.comparison_path:
        items.append(f"comparison: <code>{html.escape(inputs.comparison_path)}</code>")
    return f'<p class="meta">{" · ".join(items)}</p>'


def _summary(inputs: ReportInputs) -> str:
    parts = ['<h2 id="summary">Flagged regressions</h2>']
    if inputs.regressions:
        parts.append(flagged_table(inputs.regressions, several_places=len(machine_sections(inputs.frame)) > 1))
    elif not inputs.frame.empty:
        series = inputs.frame.groupby(["machine", "env", "suite", "case", "params", "variant", "metric"]).ngroups
        over = counted(inputs.frame.commit.nunique(), "commit")
        parts.append(f"<p class='good'>No regressions in {counted(series, 'series', 'series')} over {over}.</p>")
    if inputs.comparison is not None:
        regressed = [b for b in inputs.comparison["benchmarks"] if b.get("regressed")]
        verdicts = html.escape(inputs.comparison.get("summary", ""))
        if regressed:
            labels = [f"{b['case']} ({format_params(b['params'])}) {b['variant']}" for b in regressed]
            names = html.escape(", ".join(labels))
            parts.append(f"<p class='bad'>Comparison: {len(regressed)} regressed: {names}. ({verdicts})</p>")
        else:
            parts.append(f"<p class='good'>Comparison: no regression ({verdicts}).</p>")
    parts.append(noise_html(inputs.frame, inputs.comparison))
    return "\n".join(parts)


def _comparison_section(document: dict[str, Any], figures: _FigureIds) -> str:
    a, b = document["a"], document["b"]
    parts = [
        '<h2 id="comparison">Comparison</h2>',
        f"<p>A = <code>{html.escape(a['revision'])}</code> ({a['commit'][:8]}), "
        f"B = <code>{html.escape(b['revision'])}</code> ({b['commit'][:8]}); {document.get('rounds', '?')} "
        f"interleaved rounds on {html.escape(str(document.get('device', '?')))}; "
        f"{html.escape(document.get('summary', ''))}.</p>",
    ]
    if any(entry.get("decision") for entry in document["benchmarks"]):
        parts.append(figures.html(charts.ratio_figure(document)))
    notable = [entry for entry in document["benchmarks"] if entry["verdict"] != "no change"]
    if notable:
        rows = [_comparison_row(entry) for entry in notable]
        level = f"{document.get('settings', {}).get('confidence', 0.95):.0%} CI"
        parts.append(_table(["case", "params", "variant", "A", "B", "B/A", level, "verdict"], rows))
    return "\n".join(parts)


def _comparison_row(entry: dict[str, Any]) -> list[str]:
    decision = entry.get("decision")
    memory = entry.get("metric", TIME.name) != TIME.name  # a peak-memory row (fusebench.compare.memory_rows)
    value = format_bytes if memory else format_seconds
    variant = f"{entry['variant']} (peak device memory)" if memory else entry["variant"]
    return [
        html.escape(entry["case"]),
        html.escape(format_params(entry["params"])),
        html.escape(variant),
        value(entry["a"]["median"]) if entry["a"].get("median") else "-",
        value(entry["b"]["median"]) if entry["b"].get("median") else "-",
        f"{decision['ratio']:.3f}" if decision else "-",
        f"[{decision['ci_low']:.3f}, {decision['ci_high']:.3f}]" if decision else "-",
        f'<span class="verdict-{entry["verdict"].replace(" ", "-")}">{html.escape(entry["verdict"])}</span>',
    ]


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{h}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def load_inputs(
    results_dir: str | Path | None,
    comparison_path: str | Path | None,
    threshold: float = 0.05,
    baseline: str | None = None,
) -> ReportInputs:
    """Reads the results folder (if it exists) and the compare document (if given)."""
    from fusebench.files import read_json
    from fusebench.history.results import DATAFRAME_COLUMNS, read_results

    frame = pd.DataFrame(columns=DATAFRAME_COLUMNS)
    if results_dir is not None and Path(results_dir).is_dir():
        frame = read_results(results_dir)
    comparison = None
    if comparison_path is not None:
        check(Path(comparison_path).is_file(), lambda: f"--compare {comparison_path}: no such file")
        try:
            comparison = read_json(comparison_path)
        except ValueError as error:
            raise FusebenchError(f"--compare {comparison_path}: not JSON ({error})") from error
        check(
            isinstance(comparison, dict) and "benchmarks" in comparison and "a" in comparison,
            lambda: f"--compare {comparison_path}: not a `fusebench compare --json` document",
        )
    regressions = find_regressions(frame, threshold) if not frame.empty else []
    return ReportInputs(
        frame,
        regressions,
        comparison,
        str(results_dir) if results_dir else None,
        str(comparison_path or "") or None,
        baseline,
    )
