"""The "why" of each flagged regression in the HTML report: the reason and collapsible diffs.

For a step in a history (`fusebench.history.regressions.Regression`), the compiler's records of the
last commit before the step and the first after it are read from the results folder
(`fusebench.history.artifacts`) and explained (`fusebench.compare.why`); for a comparison, the
explanation its `--json` document already holds is shown. Each diff (the trace, each fusion
definition) is a `<details>` block, closed until clicked.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fusebench.cases.case import format_params
from fusebench.compare.why import Explanation, explain
from fusebench.history.artifacts import artifacts_dir, read_artifacts
from fusebench.history.regressions import Regression


def regression_why(results_dir: str | Path, regression: Regression) -> Explanation | None:
    """Why `regression` happened, from the records of its before and after commits (None without them)."""
    folders = [
        artifacts_dir(
            results_dir,
            regression.machine,
            commit,
            regression.suite,
            regression.case,
            regression.params,
            regression.variant,
        )
        for commit in (regression.before_commit, regression.after_commit)
    ]
    return explain(read_artifacts(folders[0]), read_artifacts(folders[1]), "slower")


def why_section(results_dir: str | Path | None, regressions: Sequence[Regression], comparison: dict | None) -> str:
    """The HTML section '<h2>Why</h2>' for the regressions and the comparison's flagged rows ('' if none)."""
    items: list[str] = []
    seen: set[tuple] = set()
    for regression in regressions if results_dir else ():
        key = (regression.machine, regression.suite, regression.case, regression.params, regression.variant)
        explanation = regression_why(results_dir, regression) if key not in seen else None
        seen.add(key)
        if explanation is not None:
            title = f"{regression.suite}.{regression.case}({regression.params}) {regression.variant}"
            items.append(_item(f"{title}, {regression.commit_range}", explanation.reason, explanation.diffs))
    for entry in (comparison or {}).get("benchmarks", []):
        why = entry.get("why")
        if why and entry.get("verdict") in ("slower", "faster", "failed"):
            title = (
                f"{entry['case']}({format_params(entry['params'])}) {entry['variant']}, comparison: {entry['verdict']}"
            )
            items.append(_item(title, why["reason"], why.get("diffs", {})))
    if not items:
        return ""
    return '<h2 id="why">Why</h2>\n' + "\n".join(items)


def _item(title: str, reason: str, diffs: dict[str, Any]) -> str:
    blocks = [
        f"<details><summary>diff of {html.escape(name)}</summary><pre class='diff'>{_colored(diff)}</pre></details>"
        for name, diff in diffs.items()
    ]
    return f"<div class='why'><p><b>{html.escape(title)}</b>: {html.escape(reason)}</p>{''.join(blocks)}</div>"


def _colored(diff: str) -> str:
    lines = []
    for line in diff.splitlines():
        style = "good" if line.startswith("+") else "bad" if line.startswith("-") else ""
        text = html.escape(line)
        lines.append(f"<span class='{style}'>{text}</span>" if style else text)
    return "\n".join(lines)
