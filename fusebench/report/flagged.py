"""The table of flagged regressions at the top of the report: one row per step, worst first.

Each row: case, params, variant, metric, the level before → after ('120 µs → 168 µs',
'0 → 19 recompilations'), the change and the commit range to `git log`. Cells break only where a
reader would: between parameters, never inside a value, a level or a commit range. The machine
and environment are not a column (their hyphenated names wrapped into tall, narrow cells): with
one (machine, env) the sentence above the table names it; with several, the rows are grouped
under a full-width heading row per (machine, env), each group worst first.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

from fusebench.history.regressions import Regression
from fusebench.report.table import counted, format_seconds

HEADERS = ("case", "params", "variant", "metric", "level", "change", "commits (before..after)")


def flagged_table(regressions: Sequence[Regression], several_places: bool) -> str:
    """The sentence and the table for `regressions` (non-empty, worst first); `several_places`:
    whether the page holds results of more than one (machine, env), so rows are grouped by it."""
    places = list(dict.fromkeys((r.machine, r.env) for r in regressions))
    grouped = several_places or len(places) > 1
    where = "" if grouped else f" of <b>{html.escape(' / '.join(places[0]))}</b>"
    sentence = f"<p>{counted(len(regressions), 'step change')} for the worse in the histories{where}, worst first.</p>"
    body = []
    for place in places:
        if grouped:
            label = html.escape(" / ".join(place))
            body.append(f'<tr class="place"><th colspan="{len(HEADERS)}">{label}</th></tr>')
        body += [_row(r) for r in regressions if (r.machine, r.env) == place]
    head = "".join(f"<th>{header}</th>" for header in HEADERS)
    return f'{sentence}<table class="flagged"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _row(regression: Regression) -> str:
    change = "new" if regression.change == float("inf") else f"+{100 * regression.change:.1f}%"
    cells = [
        html.escape(f"{regression.suite}.{regression.case}"),
        ", ".join(_nowrap(html.escape(part)) for part in re.split(r", (?=\w+=)", regression.params)),
        html.escape(regression.variant),
        html.escape(regression.metric),
        _nowrap(level(regression.value_before, regression.value_after, regression.unit)),
        f'<span class="bad">{change}</span>',
        _nowrap(f"<code>{regression.commit_range}</code>"),
    ]
    return "<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>"


def level(before: float, after: float, unit: str) -> str:
    """'120 µs → 168 µs' for seconds, '0 → 19 recompilations' for counts (HTML-escaped)."""
    if unit == "seconds":
        return f"{format_seconds(before)} → {format_seconds(after)}"
    return f"{before:g} → {after:g} {html.escape(unit)}"


def _nowrap(text: str) -> str:
    return f'<span class="nowrap">{text}</span>'
