"""The report's line on how noisy each machine was, from its control (eager) rows.

For results, the control rows of each machine and environment's newest commit (their IQR over
their median, as `fusebench run` says at its end); for a comparison, the line `fusebench compare`
printed (spread within rounds and drift between them). Nothing when there are no control rows.
"""

from __future__ import annotations

import html
from typing import Any

import pandas as pd

from fusebench.measure.noise import is_control, machine_noise, relative_spread
from fusebench.measure.outcome import TIME


def noise_html(frame: pd.DataFrame, comparison: dict[str, Any] | None) -> str:
    """One paragraph per machine and environment (and the comparison), 'noisy' ones marked bad."""
    lines: list[tuple[str, bool]] = []
    if not frame.empty and {"q25", "q75"} <= set(frame.columns):
        times = frame[(frame.metric == TIME.name) & frame.variant.map(is_control) & frame.value.notna()]
        for (machine, env), rows in times.groupby(["machine", "env"], sort=True):
            newest = rows[rows.date == rows.date.max()]
            spreads = [
                relative_spread(float(row.value), float(row.q25), float(row.q75))
                for row in newest.itertuples()
                if pd.notna(row.q25) and pd.notna(row.q75)
            ]
            noise = machine_noise(spreads)
            if noise.controls:
                lines.append((f"{machine} ({env}), newest commit: {noise.line()}", noise.noisy))
    if comparison is not None and comparison.get("noise", {}).get("line"):
        lines.append((f"comparison: {comparison['noise']['line']}", bool(comparison["noise"].get("noisy"))))
    return "\n".join(f"<p class='{'bad' if noisy else 'meta'}'>{html.escape(text)}</p>" for text, noisy in lines)
