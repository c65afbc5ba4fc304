"""The scoreboard as a heatmap: a row per (suite, case, params), a column per variant.

Each timed cell shows the time per call and its ratio to the row's reference (the fastest
variant, in bold, or the `--baseline` variant); its colour is the ratio on a log scale, green for
the fastest or faster than the baseline, red for 4× slower or more. Cells without a time show
their status (unsupported and skipped in grey, failed, error and crashed in purple) and the reason on
hover. A cell measured at an older commit than the newest of its row is marked with '*' (hover
names the commit): each cell is its variant's latest measurement on this machine.
"""

from __future__ import annotations

import html
import math
import textwrap
from collections.abc import Callable, Sequence

import pandas as pd
import plotly.graph_objects as go

from fusebench.errors import check
from fusebench.report.charts import LAYOUT
from fusebench.report.scoreboard import Cell, Row, rows_from_frame, variant_columns
from fusebench.report.summary import format_ratio, headline
from fusebench.report.table import format_seconds

RATIO_COLORS = [[0.0, "#1a9850"], [0.25, "#91cf60"], [0.5, "#ffffbf"], [0.75, "#fc8d59"], [1.0, "#d73027"]]
NO_RATIO, NOT_RUN, FAILED = 0.0, 0.5, 1.0  # the status layer's values: white, grey, purple
STATUS_COLORS = [[NO_RATIO, "#ffffff"], [NOT_RUN, "#e6e6e6"], [FAILED, "#dcc3ea"]]
NOT_RUN_HERE = ("unsupported", "skipped")


def check_baseline(frame: pd.DataFrame, baseline: str | None) -> None:
    """Raises when `baseline` names no variant of the results."""
    variants = sorted(map(str, frame.variant.unique())) if not frame.empty else []
    check(
        baseline is None or baseline in variants,
        lambda: f"--baseline {baseline}: no variant of that name in the results; expected one of {variants}",
    )


def scoreboard_section(
    frame: pd.DataFrame, baseline: str | None, figure_html: Callable[[go.Figure], str], anchor: str, where: str
) -> str:
    """The HTML of the scoreboard of one machine and environment (`frame`: its rows)."""
    rows = rows_from_frame(frame)
    parts = [f'<h2 id="{html.escape(anchor)}">Scoreboard</h2>']
    if not rows:
        return parts[0] + "<p>No measurement recorded.</p>"
    commits = sorted({cell.commit[:8] for row in rows for cell in row.cells.values()})
    at = f"commit <code>{commits[0]}</code>" if len(commits) == 1 else f"{len(commits)} commits"
    reference = (
        f"its ratio to <b>{html.escape(baseline)}</b> (green: faster than {html.escape(baseline)}, red: slower; "
        f"rows without a {html.escape(baseline)} time show times only)"
        if baseline
        else "its ratio to the fastest variant of the row (in bold; green: fastest, red: 4× slower or more)"
    )
    parts.append(
        f"<p>The latest measurement of each variant on <b>{html.escape(where)}</b> ({at}). Each cell: time per call "
        f"and {reference}. Grey: unsupported or skipped here; purple: failed, errored or crashed; hover for the reason."
        + (" *: measured at an older commit than the rest of its row." if len(commits) > 1 else "")
        + "</p>"
    )
    parts.append(f'<p class="headline">{html.escape(headline(rows))}</p>')
    parts.append(figure_html(scoreboard_figure(rows, baseline)))
    return "\n".join(parts)


def scoreboard_figure(rows: Sequence[Row], baseline: str | None = None) -> go.Figure:
    """Two heatmap layers over the same grid: ratios of timed cells, statuses of the others."""
    columns = variant_columns(rows)
    labels = _row_labels(rows)
    shape = (len(rows), len(columns))
    ratio_z, status_z = _grid(shape, math.nan), _grid(shape, math.nan)
    ratio_text, status_text, hover = _grid(shape, ""), _grid(shape, ""), _grid(shape, "")
    for i, row in enumerate(rows):
        reference = row.reference(baseline)
        newest = row.newest_commit()
        for j, variant in enumerate(columns):
            cell = row.cells.get(variant)
            if cell is None:
                continue
            older = "*" if cell.commit != newest else ""
            hover[i][j] = _hover(row, cell, baseline)
            if cell.timed:
                ratio = row.ratio(variant, baseline)
                text = format_seconds(cell.seconds) + older + ("" if ratio is None else f"<br>{format_ratio(ratio)}")
                if ratio is None:  # NOTE: no baseline time in this row: a time without colour
                    status_text[i][j], status_z[i][j] = text, NO_RATIO
                else:
                    ratio_text[i][j] = f"<b>{text}</b>" if cell is reference else text
                    ratio_z[i][j] = math.log2(ratio)
            else:
                status_text[i][j] = cell.status + older
                status_z[i][j] = NOT_RUN if cell.status in NOT_RUN_HERE else FAILED
    low, high = (-2, 2) if baseline else (0, 2)
    ticks = list(range(low, high + 1))
    tick_text = [f"{2.0**t:g}×" for t in ticks]
    tick_text[-1] = "≥" + tick_text[-1]
    if baseline:
        tick_text[0] = "≤" + tick_text[0]
    common = {"x": columns, "y": labels, "customdata": hover, "hoverongaps": False, "xgap": 2, "ygap": 2}
    common["hovertemplate"] = "%{customdata}<extra></extra>"
    figure = go.Figure()
    figure.add_trace(
        go.Heatmap(
            z=ratio_z,
            text=ratio_text,
            texttemplate="%{text}",
            colorscale=RATIO_COLORS,
            zmin=low,
            zmax=high,
            colorbar={"title": {"text": "ratio"}, "tickvals": ticks, "ticktext": tick_text, "len": 0.8},
            name="time",
            **common,
        )
    )
    figure.add_trace(
        go.Heatmap(
            z=status_z,
            text=status_text,
            texttemplate="%{text}",
            colorscale=STATUS_COLORS,
            zmin=0,
            zmax=1,
            showscale=False,
            name="status",
            **common,
        )
    )
    height = 150 + 44 * len(rows)
    margin = {"l": 20, "r": 20, "t": 90, "b": 20}
    figure.update_layout(**{**LAYOUT, "height": height, "margin": margin}, font={"size": 12})
    figure.update_xaxes(side="top", type="category", showgrid=False)
    figure.update_yaxes(autorange="reversed", type="category", showgrid=False, automargin=True)
    return figure


def _row_labels(rows: Sequence[Row]) -> list[str]:
    """'case · params' per row (string quotes dropped), prefixed by the suite where that is ambiguous."""
    labels = [f"{row.case} · {row.params.replace(chr(39), '')}" for row in rows]
    if len(set(labels)) < len(labels):
        labels = [f"{row.suite}.{label}" for row, label in zip(rows, labels)]
    return labels


def _hover(row: Row, cell: Cell, baseline: str | None) -> str:
    head = f"<b>{html.escape(cell.variant)}</b> · {html.escape(row.suite)}.{html.escape(row.case)}<br>"
    head += html.escape(row.params) + "<br>"
    commit = f"<br>commit {cell.commit[:8]}" if cell.commit else ""
    if not cell.timed:
        reason = "<br>".join(html.escape(line) for line in textwrap.wrap(cell.detail, 90)[:6])
        return head + f"<b>{html.escape(cell.status)}</b>: " + (reason or "no reason recorded") + commit
    ratio = row.ratio(cell.variant, baseline)
    against = baseline or "the fastest"
    text = head + f"time per call {format_seconds(cell.seconds)}"
    text += f"<br>{format_ratio(ratio)} {html.escape(against)}" if ratio is not None else ""
    counts = [
        f"{name} {value:g}"
        for name, value in (("kernels", cell.kernels), ("fusions", cell.fusions))
        if value is not None
    ]
    return text + ("<br>" + ", ".join(counts) + " per call" if counts else "") + commit


def _grid(shape: tuple[int, int], fill: object) -> list[list]:
    return [[fill] * shape[1] for _ in range(shape[0])]
