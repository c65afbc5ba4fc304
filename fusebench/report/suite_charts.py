"""A suite's section of the report: time per call next to kernels and fusions per call.

With one commit recorded, each case gets one chart of grouped bars: the latest time per call of
each variant for each params (log axis), and beside it the kernels and fusions per call. With
several commits, each (case, params) gets its own history: a line per variant over the commits
(IQR error bars, regressions marked with a red cross), again with kernels and fusions per call
beside it. Panels with nothing recorded (kernels on CPU) are left out. The suite ends with the
latest bandwidth as a fraction of the machine's peak, the latest recompilation counts and, where
recorded (CUDA), the latest peak device memory of each measurement.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Callable, Sequence

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from fusebench.history.regressions import Regression
from fusebench.measure.outcome import FUSIONS, KERNELS, PEAK_DEVICE, PEAK_FRACTION, RECOMPILATIONS, TIME, Metric
from fusebench.report import charts
from fusebench.report.table import format_seconds

PANEL_TITLES = {TIME.name: "time per call", KERNELS.name: "kernels per call", FUSIONS.name: "fusions per call"}
_MARGIN = {"l": 60, "r": 20, "t": 70, "b": 110}
_REGRESSION_MARKER = {"symbol": "x", "size": 14, "color": "#d62728", "line": {"width": 2}}


def suite_section(
    suite: str,
    frame: pd.DataFrame,
    regressions: Sequence[Regression],
    figure_html: Callable[[go.Figure], str],
    colors: dict[str, str],
    anchor: str,
) -> str:
    """The HTML of one suite's section (`frame`: the suite's rows of one machine and environment)."""
    parts = [f'<h2 id="{html.escape(anchor)}">Suite {html.escape(suite)}</h2>']
    for case, case_frame in frame.groupby("case", sort=False):
        times = _timed(case_frame)
        if times.empty:
            parts.append(f"<p>{html.escape(str(case))}: no timed measurement recorded.</p>")
            continue
        if times.commit.nunique() == 1:
            title = f"{suite}.{case}: latest time per call at {times.commit.iloc[0][:8]}"
            parts.append(figure_html(latest_times_figure(case_frame, colors, title)))
            continue
        for params, params_frame in case_frame.groupby("params", sort=False):
            if _timed(params_frame).empty:
                continue
            marked = [r for r in regressions if r.suite == suite and r.case == case and r.params == params]
            title = f"{suite}.{case} · {params}"
            parts.append(figure_html(params_history_figure(params_frame, marked, colors, title)))
    for metric, title, axis in (
        (PEAK_FRACTION, "effective bandwidth as a fraction of the machine's peak", "fraction of peak bandwidth"),
        (RECOMPILATIONS, "recompilations after the first call", "recompilations"),
        (PEAK_DEVICE, "device memory the measurement allocated at its peak", "bytes"),
    ):
        if not charts.latest_values(frame, metric.name).empty:
            figure = charts.latest_bar_figure(frame, metric.name, f"{suite}: {title} (latest commit)", axis, colors)
            parts.append(figure_html(figure))
    return "\n".join(parts)


def latest_times_figure(case_frame: pd.DataFrame, colors: dict[str, str], title: str) -> go.Figure:
    """Grouped bars of the latest value per (params, variant): time per call on a log axis, then
    kernels and fusions per call where recorded."""
    panels = _panels(case_frame)
    figure = _figure_with_panels(panels, title)
    labels = {params: _wrap_params(str(params)) for params in dict.fromkeys(case_frame.params)}
    for column, metric in enumerate(panels, start=1):
        latest = charts.latest_values(case_frame, metric.name)
        for variant in (v for v in colors if v in set(latest.variant)):
            rows = latest[latest.variant == variant]
            figure.add_trace(
                go.Bar(
                    x=[labels[p] for p in rows.params],
                    y=rows.value,
                    name=variant,
                    legendgroup=variant,
                    showlegend=column == 1,
                    marker_color=colors[variant],
                    text=[_bar_label(metric, v) for v in rows.value],
                    textposition="outside",
                    cliponaxis=False,
                    customdata=[_value_text(metric, v) for v in rows.value],
                    hovertemplate="%{x}<br>%{customdata}<extra>" + variant + "</extra>",
                ),
                row=1,
                col=column,
            )
        figure.update_xaxes(categoryorder="array", categoryarray=list(labels.values()), row=1, col=column)
    figure.update_layout(barmode="group", uniformtext={"minsize": 8, "mode": "show"})
    _count_axes(figure, case_frame, panels)
    figure.update_yaxes(type="log", **log_time_ticks(_timed(case_frame).value), row=1, col=1)
    return figure


def params_history_figure(
    params_frame: pd.DataFrame, regressions: Sequence[Regression], colors: dict[str, str], title: str
) -> go.Figure:
    """One (case, params) over the commits: a line per variant for time per call (IQR error bars),
    then kernels and fusions per call where recorded; regressions of each metric marked."""
    panels = _panels(params_frame)
    figure = _figure_with_panels(panels, title)
    order = charts.commit_order(params_frame)
    position = {commit: index for index, commit in enumerate(order)}
    labels = [commit[:8] for commit in order]
    for column, metric in enumerate(panels, start=1):
        values = params_frame[(params_frame.metric == metric.name) & params_frame.value.notna()]
        for variant in (v for v in colors if v in set(values.variant)):
            series = values[values.variant == variant]
            series = series.assign(x=series.commit.map(position)).sort_values("x")
            figure.add_trace(
                go.Scatter(
                    x=[labels[i] for i in series.x],
                    y=series.value,
                    mode="lines+markers",
                    name=variant,
                    legendgroup=variant,
                    showlegend=column == 1,
                    line={"color": colors[variant], "shape": "linear" if metric is TIME else "hv"},
                    error_y=charts.iqr_bars(series) if metric is TIME else None,
                    customdata=[_value_text(metric, v) for v in series.value],
                    hovertemplate="%{x}<br>%{customdata}<extra>" + variant + "</extra>",
                ),
                row=1,
                col=column,
            )
        marked = [r for r in regressions if r.metric == metric.name and r.after_commit in position]
        if marked:
            lookup = values.set_index(["commit", "variant"]).value
            figure.add_trace(
                go.Scatter(
                    x=[labels[position[r.after_commit]] for r in marked],
                    y=[lookup.get((r.after_commit, r.variant), r.value_after) for r in marked],
                    mode="markers",
                    name="regression",
                    showlegend=False,
                    marker=_REGRESSION_MARKER,
                    text=[f"{r.variant}: {_change(r)} in {r.commit_range}" for r in marked],
                    hovertemplate="%{text}<extra>regression</extra>",
                ),
                row=1,
                col=column,
            )
        figure.update_xaxes(type="category", categoryorder="array", categoryarray=labels, row=1, col=column)
    times = _timed(params_frame).value
    # NOTE: variants can differ 100-fold (a cold compile vs a cached call): log scale when they do
    wide = bool(times.min() > 0 and times.max() / times.min() > 20)
    scale = {"type": "log", **log_time_ticks(times)} if wide else {"tickformat": ".3~s", "ticksuffix": "s"}
    figure.update_yaxes(**scale, row=1, col=1)
    figure.update_xaxes(title_text="commit (oldest first)", row=1, col=1)
    _count_axes(figure, params_frame, panels)
    return figure


def log_time_ticks(seconds: pd.Series) -> dict[str, list]:
    """Ticks at 1, 2 and 5 times each power of ten within the range of `seconds`, labelled as durations."""
    low, high = float(seconds.min()), float(seconds.max())
    values = [
        step * 10.0**exponent
        for exponent in range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1)
        for step in (1, 2, 5)
    ]
    shown = [v for v in values if low / 2.5 <= v <= high * 2.5]
    return {"tickvals": shown, "ticktext": [re.sub(r"\.0+ ", " ", format_seconds(v)) for v in shown]}


def _timed(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[(frame.metric == TIME.name) & frame.value.notna()]


def _panels(frame: pd.DataFrame) -> list[Metric]:
    """Time per call, then kernels and fusions per call if any value of them is recorded."""
    counts = [m for m in (KERNELS, FUSIONS) if not frame[(frame.metric == m.name) & frame.value.notna()].empty]
    return [TIME, *counts]


def _count_axes(figure: go.Figure, frame: pd.DataFrame, panels: Sequence[Metric]) -> None:
    """Count panels start at zero and tick at whole numbers while the counts are small."""
    for column, metric in enumerate(panels, start=1):
        if metric is TIME:
            continue
        most = float(frame[(frame.metric == metric.name)].value.max())
        figure.update_yaxes(range=[0, max(1.0, most * 1.2)], dtick=1 if most <= 8 else None, row=1, col=column)


def _figure_with_panels(panels: Sequence[Metric], title: str) -> go.Figure:
    widths = {1: [1.0], 2: [0.72, 0.28], 3: [0.6, 0.2, 0.2]}[len(panels)]
    figure = make_subplots(
        rows=1,
        cols=len(panels),
        column_widths=widths,
        subplot_titles=[PANEL_TITLES[m.name] for m in panels],
        horizontal_spacing=0.08,
    )
    legend = {"orientation": "h", "yanchor": "top", "y": -0.22, "x": 0}
    figure.update_layout(title=title, legend=legend, **{**charts.LAYOUT, "height": 400, "margin": _MARGIN})
    return figure


def _value_text(metric: Metric, value: float) -> str:
    return format_seconds(float(value)) if metric is TIME else f"{value:g} {PANEL_TITLES[metric.name]}"


def _bar_label(metric: Metric, value: float) -> str:
    return format_seconds(float(value)).replace(" ", "") if metric is TIME else f"{value:g}"


def _change(regression: Regression) -> str:
    return "new" if regression.change == float("inf") else f"+{100 * regression.change:.0f}%"


def _wrap_params(params: str) -> str:
    """'shape=(4, 64), dtype=...' with a line break between parameters and without string quotes."""
    return "<br>".join(re.split(r", (?=\w+=)", params.replace("'", "")))
