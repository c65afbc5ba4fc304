"""The plotly figures of a report: histories, bandwidth, recompilations, and a comparison's ratios.

Each function takes plain data (a `read_results` DataFrame, regressions, a compare document) and
returns a `plotly.graph_objects.Figure`; `fusebench.report.report` lays them out in one HTML page.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from fusebench.cases.case import format_params
from fusebench.history.regressions import Regression
from fusebench.measure.outcome import PEAK_FRACTION, RECOMPILATIONS, TIME

VERDICT_COLORS = {
    "slower": "#d62728",
    "faster": "#2ca02c",
    "no change": "#7f7f7f",
    "failed": "#9467bd",
    "new": "#1f77b4",
    "gone": "#8c564b",
    "skipped": "#c7c7c7",
}
_LAYOUT = {"template": "plotly_white", "margin": {"l": 60, "r": 20, "t": 50, "b": 60}, "height": 420}


def commit_order(frame: pd.DataFrame) -> list[str]:
    """Commits oldest first by commit date (the x axis of every history)."""
    dated = frame[["commit", "date"]].drop_duplicates("commit").sort_values(["date", "commit"], kind="stable")
    return list(dated.commit)


def history_figure(case_frame: pd.DataFrame, regressions: Sequence[Regression], title: str) -> go.Figure:
    """Time per call over commits, one line per (params, variant[, machine/env]), IQR as error bars,
    regressions of `time_call` marked with a red cross at the first commit after the step."""
    times = case_frame[(case_frame.metric == TIME.name) & case_frame.value.notna()]
    order = commit_order(case_frame)
    position = {commit: index for index, commit in enumerate(order)}
    labels = [commit[:8] for commit in order]
    several_envs = times[["machine", "env"]].drop_duplicates().shape[0] > 1
    figure = go.Figure()
    for (params, variant, machine, env), series in times.groupby(["params", "variant", "machine", "env"], sort=False):
        series = series.assign(x=series.commit.map(position)).sort_values("x")
        name = f"{variant} · {params}" + (f" · {machine}/{env}" if several_envs else "")
        figure.add_trace(
            go.Scatter(
                x=[labels[i] for i in series.x],
                y=series.value,
                mode="lines+markers",
                name=name,
                error_y=_iqr_bars(series),
                hovertemplate="%{x}<br>%{y:.3s}s<extra>" + name + "</extra>",
            )
        )
    marked = [r for r in regressions if r.metric == TIME.name and r.after_commit in position]
    if marked:
        lookup = times.set_index(["commit", "params", "variant", "machine", "env"]).value
        figure.add_trace(
            go.Scatter(
                x=[labels[position[r.after_commit]] for r in marked],
                y=[lookup.get((r.after_commit, r.params, r.variant, r.machine, r.env), r.value_after) for r in marked],
                mode="markers",
                name="regression",
                marker={"symbol": "x", "size": 14, "color": "#d62728", "line": {"width": 2}},
                text=[f"{r.variant} · {r.params}: +{100 * r.change:.0f}% in {r.commit_range}" for r in marked],
                hovertemplate="%{text}<extra>regression</extra>",
            )
        )
    figure.update_layout(title=title, yaxis_title="time per call", xaxis_title="commit (oldest first)", **_LAYOUT)
    figure.update_xaxes(type="category", categoryorder="array", categoryarray=labels)
    low, high = times.value.min(), times.value.max()
    # NOTE: variants can differ 100-fold (a cold compile vs a cached call): log scale when they do
    wide = bool(low > 0 and high / low > 20)
    if wide:
        figure.update_yaxes(type="log", dtick="D2", tickformat="~s", ticksuffix="s")
    else:
        figure.update_yaxes(type="linear", tickformat=".3~s", ticksuffix="s")
    return figure


def latest_bar_figure(suite_frame: pd.DataFrame, metric: str, title: str, axis_title: str) -> go.Figure:
    """The latest value of `metric` per (case params, variant) of a suite, as grouped horizontal bars."""
    latest = latest_values(suite_frame, metric)
    figure = go.Figure()
    for variant, rows in latest.groupby("variant", sort=False):
        labels = [f"{case} ({params})" for case, params in zip(rows.case, rows.params)]
        figure.add_trace(go.Bar(y=labels, x=rows.value, name=variant, orientation="h"))
    height = max(300, 28 * latest[["case", "params"]].drop_duplicates().shape[0] * max(1, latest.variant.nunique()))
    figure.update_layout(title=title, xaxis_title=axis_title, barmode="group", **{**_LAYOUT, "height": height})
    figure.update_yaxes(automargin=True)
    if metric == PEAK_FRACTION.name:
        figure.update_xaxes(tickformat="~%", rangemode="tozero")
    if metric == RECOMPILATIONS.name:
        most = float(latest.value.max())
        figure.update_xaxes(range=[0, max(1.0, most * 1.05)], dtick=1 if most <= 20 else None)
    return figure


def latest_values(frame: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Rows of `metric` at each series' newest commit (with a value)."""
    rows = frame[(frame.metric == metric) & frame.value.notna()]
    if rows.empty:
        return rows
    rows = rows.sort_values(["date", "commit"], kind="stable")
    return rows.drop_duplicates(["machine", "env", "case", "params", "variant"], keep="last")


def ratio_figure(document: dict[str, Any]) -> go.Figure:
    """A comparison's B/A time ratios with their confidence intervals, coloured by verdict."""
    decided = [b for b in document["benchmarks"] if b.get("decision")]
    labels = [f"{b['case']} ({format_params(b['params'])}) {b['variant']}" for b in decided]
    figure = go.Figure()
    for verdict, color in VERDICT_COLORS.items():
        rows = [(label, b["decision"]) for label, b in zip(labels, decided) if b["verdict"] == verdict]
        if not rows:
            continue
        figure.add_trace(
            go.Scatter(
                x=[d["ratio"] for _, d in rows],
                y=[label for label, _ in rows],
                mode="markers",
                name=verdict,
                marker={"color": color, "size": 10},
                error_x={
                    "type": "data",
                    "symmetric": False,
                    "array": [d["ci_high"] - d["ratio"] for _, d in rows],
                    "arrayminus": [d["ratio"] - d["ci_low"] for _, d in rows],
                },
                hovertemplate="%{y}<br>B/A %{x:.3f}<extra>" + verdict + "</extra>",
            )
        )
    effect = document.get("settings", {}).get("min_effect", 0.05)
    for x, dash in ((1.0, "solid"), (1 + effect, "dot"), (1 / (1 + effect), "dot")):
        figure.add_vline(x=x, line_dash=dash, line_color="#555", opacity=0.6)
    a, b = document["a"], document["b"]
    title = f"B/A time per call, 95% CI (A = {a['revision']} {a['commit'][:8]}, B = {b['revision']} {b['commit'][:8]})"
    height = max(300, 30 * len(decided) + 120)
    figure.update_layout(title=title, xaxis_title="B / A (> 1: B is slower)", **{**_LAYOUT, "height": height})
    figure.update_yaxes(automargin=True, type="category")
    return figure


def _iqr_bars(series: pd.DataFrame) -> dict[str, Any] | None:
    q25, q75 = pd.to_numeric(series.q25, errors="coerce"), pd.to_numeric(series.q75, errors="coerce")
    if q25.isna().all() or q75.isna().all():
        return None
    value = series.value.astype(float)
    return {
        "type": "data",
        "symmetric": False,
        "array": list((q75 - value).clip(lower=0).fillna(0)),
        "arrayminus": list((value - q25).clip(lower=0).fillna(0)),
        "thickness": 1,
    }
