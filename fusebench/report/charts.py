"""The shared plotly pieces of a report: variant colours, commit order, latest values, IQR bars,
the latest bandwidth and recompilation bars, and a comparison's ratios.

Each figure function takes plain data (a `read_results` DataFrame, a compare document) and returns
a `plotly.graph_objects.Figure`; `fusebench.report.report` lays them out in one HTML page (the
scoreboard's heatmap is in `scoreboard_chart.py`, the per-suite time charts in `suite_charts.py`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd
import plotly.colors
import plotly.graph_objects as go

from fusebench.cases.case import format_params
from fusebench.measure.outcome import PEAK_DEVICE, PEAK_FRACTION, RECOMPILATIONS
from fusebench.report.scoreboard import variant_order
from fusebench.report.table import format_bytes

VERDICT_COLORS = {
    "slower": "#d62728",
    "faster": "#2ca02c",
    "no change": "#7f7f7f",
    "noisy": "#ff7f0e",
    "failed": "#9467bd",
    "new": "#1f77b4",
    "gone": "#8c564b",
    "skipped": "#c7c7c7",
}
_PALETTE = plotly.colors.qualitative.Plotly + plotly.colors.qualitative.D3[:5] + plotly.colors.qualitative.Dark2
LAYOUT = {"template": "plotly_white", "margin": {"l": 60, "r": 20, "t": 50, "b": 60}, "height": 420}


def variant_colors(variants: Iterable[str]) -> dict[str, str]:
    """A colour per variant, in `variant_order`, so a variant looks the same in every chart and report."""
    return {name: _PALETTE[index % len(_PALETTE)] for index, name in enumerate(variant_order(variants))}


def commit_order(frame: pd.DataFrame) -> list[str]:
    """Commits oldest first by commit date (the x axis of every history)."""
    dated = frame[["commit", "date"]].drop_duplicates("commit").sort_values(["date", "commit"], kind="stable")
    return list(dated.commit)


def latest_bar_figure(
    suite_frame: pd.DataFrame, metric: str, title: str, axis_title: str, colors: dict[str, str] | None = None
) -> go.Figure:
    """The latest value of `metric` per (case params, variant) of a suite, as grouped horizontal bars."""
    latest = latest_values(suite_frame, metric)
    figure = go.Figure()
    for variant, rows in latest.groupby("variant", sort=False):
        labels = [f"{case} ({params})" for case, params in zip(rows.case, rows.params)]
        color = (colors or {}).get(str(variant))
        text = [_bar_text(metric, value) for value in rows.value]
        bar = go.Bar(y=labels, x=rows.value, name=variant, orientation="h", marker_color=color, text=text)
        figure.add_trace(bar.update(textposition="outside", cliponaxis=False))
    height = max(300, 28 * latest[["case", "params"]].drop_duplicates().shape[0] * max(1, latest.variant.nunique()))
    figure.update_layout(title=title, xaxis_title=axis_title, barmode="group", **{**LAYOUT, "height": height})
    figure.update_yaxes(automargin=True)
    if metric == PEAK_FRACTION.name:
        figure.update_xaxes(tickformat="~%", rangemode="tozero")
    if metric == RECOMPILATIONS.name:
        most = float(latest.value.max())
        figure.update_xaxes(range=[0, max(1.0, most * 1.05)], dtick=1 if most <= 20 else None)
    return figure


def _bar_text(metric: str, value: float) -> str:
    if metric == PEAK_FRACTION.name:
        return f"{value:.1%}"
    if metric == PEAK_DEVICE.name:
        return format_bytes(value)
    return f"{value:.3g}"


def latest_values(frame: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Rows of `metric` at each series' newest commit (with a value)."""
    rows = frame[(frame.metric == metric) & frame.value.notna()]
    if rows.empty:
        return rows
    rows = rows.sort_values(["date", "commit"], kind="stable")
    return rows.drop_duplicates(["machine", "env", "case", "params", "variant"], keep="last")


def ratio_figure(document: dict[str, Any]) -> go.Figure:
    """A comparison's B/A time ratios with their confidence intervals, coloured by verdict."""
    decided = [b for b in document["benchmarks"] if b.get("decision") and b.get("metric", "time_call") == "time_call"]
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
    level = document.get("settings", {}).get("confidence", 0.95)
    sides = f"A = {a['revision']} {a['commit'][:8]}, B = {b['revision']} {b['commit'][:8]}"
    title = f"B/A time per call, {level:.0%} CI ({sides})"
    height = max(300, 30 * len(decided) + 120)
    figure.update_layout(title=title, xaxis_title="B / A (> 1: B is slower)", **{**LAYOUT, "height": height})
    figure.update_yaxes(automargin=True, type="category")
    return figure


def iqr_bars(series: pd.DataFrame) -> dict[str, Any] | None:
    """Asymmetric error bars from each point's value to its 25th and 75th percentiles, or None."""
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
