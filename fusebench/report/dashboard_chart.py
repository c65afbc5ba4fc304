"""The report's dashboard section: the headline table of one machine and environment (the latest
measurement of each series, as the scoreboard takes them) and, with several commits, its history:
speedup over eager and pass rate per variant and suite, commit by commit."""

from __future__ import annotations

import html
from collections.abc import Callable

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from fusebench.report.charts import LAYOUT
from fusebench.report.dashboard import (
    EAGER,
    Modes,
    bundled_modes,
    dashboard,
    dashboard_history,
    latest_measurements,
    pass_rate_text,
)
from fusebench.report.summary import format_ratio

HEADERS = ["variant", "suite", "pass rate", "speedup over eager", "mean compile s", "memory ratio vs eager"]


def dashboard_section(
    frame: pd.DataFrame,
    figure_html: Callable[[go.Figure], str],
    anchor: str,
    label: str,
    colors: dict[str, str],
    modes: Modes | None = None,
) -> str:
    """The dashboard of one machine and environment's results: a table, then a history chart when
    they span several commits ('' without a timed measurement). `modes`: (suite, case) -> mode, by
    default the bundled suites' (results files keep no case metadata)."""
    modes = bundled_modes() if modes is None else modes
    entries = dashboard(latest_measurements(frame, modes))
    if not entries:
        return ""
    rows = "".join(
        "<tr>"
        f"<td>{html.escape(entry.variant)}</td><td>{html.escape(entry.suite)}</td>"
        f'<td class="num">{pass_rate_text(entry)}</td><td class="num">{format_ratio(entry.speedup)}</td>'
        f'<td class="num">{"-" if entry.compile_seconds is None else f"{entry.compile_seconds:.3f}"}</td>'
        f'<td class="num">{format_ratio(entry.memory_ratio)}</td>'
        "</tr>"
        for entry in entries
    )
    head = "".join(f"<th>{header}</th>" for header in HEADERS)
    parts = [
        f'<h2 id="{anchor}">Dashboard: {html.escape(label)}</h2>',
        "<p>Per variant and suite (and mode, where a suite's cases name one: inference, training, decode), "
        "from each series' latest measurement: the share of (case, params) whose "
        "result matched the reference (skipped ones not counted); the geometric means of eager's time and of "
        "eager's peak device memory over the variant's (&gt; 1× is better; times from samples timed alternately "
        "where the run took them); the mean compile time.</p>",
        f'<table class="dashboard"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>',
    ]
    if frame.commit.nunique() > 1:
        parts.append(figure_html(history_figure(dashboard_history(frame, modes), colors)))
    return "\n".join(parts)


def history_figure(history: pd.DataFrame, colors: dict[str, str]) -> go.Figure:
    """Speedup over eager (top) and pass rate (bottom) per variant and suite, commit by commit."""
    commits = list(dict.fromkeys(history.commit))
    figure = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                           subplot_titles=["speedup over eager (geometric mean)", "pass rate"])  # fmt: skip
    for (variant, suite), series in history.groupby(["variant", "suite"], sort=True):
        name = f"{variant} · {suite}"
        x = [commit[:8] for commit in series.commit]
        line = {"color": colors.get(str(variant))}
        if variant != EAGER:
            figure.add_trace(
                go.Scatter(x=x, y=series.speedup, name=name, legendgroup=name, mode="lines+markers", line=line),
                row=1,
                col=1,
            )
        figure.add_trace(
            go.Scatter(x=x, y=series.pass_rate, name=name, legendgroup=name, showlegend=variant == EAGER,
                       mode="lines+markers", line={**line, "dash": "dot"}),
            row=2,
            col=1,
        )  # fmt: skip
    figure.update_xaxes(type="category", categoryorder="array", categoryarray=[c[:8] for c in commits])
    figure.update_yaxes(title_text="× eager", row=1, col=1)
    figure.update_yaxes(title_text="passed", tickformat=".0%", range=[0, 1.05], row=2, col=1)
    figure.update_layout(title="Dashboard over commits", **{**LAYOUT, "height": 560})
    return figure
