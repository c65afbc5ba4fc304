"""The summary table `fusebench run` prints: one row per (case, params, variant).

Columns: case, params, variant, median, IQR, GB/s, % of peak, compile s, recompiles, kernels,
fusions. A measurement that is not ok shows its status and reason in place of the numbers. "n/a"
means the quantity does not exist here (kernels on CPU), "-" that the variant does not report it.
A training step's kernels and fusions read 'forward+backward' ('2+3'). Columns that only some
runs have follow where some outcome has a value: 'peak dev' (device memory the measurement
allocated at its peak, CUDA), 'peak RSS' (the measuring process's peak RSS; see
`fusebench.measure.memory`) and 'tokens/s' (model cases).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from fusebench.cases.case import format_params
from fusebench.measure.outcome import Outcome

HEADERS = [
    "case",
    "params",
    "variant",
    "median",
    "IQR",
    "GB/s",
    "% peak",
    "compile s",
    "recompiles",
    "kernels",
    "fusions",
]
_NUMERIC_FROM = 3  # columns from here on are right-aligned
MAX_DETAIL = 100


def format_seconds(seconds: float | None) -> str:
    """A duration with three significant digits and a readable unit: '512 µs', '1.23 ms', '4.75 s'.
    The unit is chosen after rounding, so 999.96 µs reads '1.00 ms', not '1000 µs'."""
    if seconds is None:
        return "-"
    rounded = float(f"{seconds:.3g}")
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if rounded >= scale:
            return f"{three_digits(seconds / scale)} {unit}"
    return f"{three_digits(seconds / 1e-9)} ns"


def format_bytes(size: float | None) -> str:
    """A size in binary units with three significant digits: '512 B', '1.50 KiB', '12.3 MiB', '2.00 GiB'."""
    if size is None:
        return "-"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if float(f"{size / scale:.3g}") >= 1:
            return f"{three_digits(size / scale)} {unit}"
    return f"{size:.0f} B"


def three_digits(value: float) -> str:
    """`value` (>= 0) with three significant digits, trailing zeros kept: '512', '51.2', '5.12', '5.00';
    from 1000 on, the whole number ('1235')."""
    if value >= 999.5:
        return f"{value:.0f}"
    rounded = float(f"{value:.3g}")
    decimals = 0 if rounded >= 100 else 1 if rounded >= 10 else 2
    return f"{rounded:.{decimals}f}"


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """'1 commit', '8 commits' ('1 series', '3 series' with `plural`='series')."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def status_text(outcome: Outcome) -> str:
    """'status: reason', shortened for a line: paths under the working folder become relative."""
    detail = outcome.detail.replace(os.getcwd() + os.sep, "")
    if len(detail) > MAX_DETAIL:
        detail = detail[: MAX_DETAIL - 3] + "..."
    return f"{outcome.status}: {detail}" if detail else outcome.status


def row_cells(outcome: Outcome) -> list[str]:
    """The cells of one outcome's row (a non-ok outcome has one cell after the variant)."""
    head = [outcome.case, format_params(outcome.params), outcome.variant]
    if outcome.status != "ok" or outcome.timing is None:
        return [*head, status_text(outcome)]
    bandwidth, fraction = outcome.bandwidth_gbs, outcome.peak_fraction
    return [
        *head,
        format_seconds(outcome.timing.median),
        format_seconds(outcome.timing.iqr),
        "-" if bandwidth is None else f"{bandwidth:.1f}",
        "-" if fraction is None else f"{100 * fraction:.1f}%",
        "-" if outcome.compile_seconds is None else f"{outcome.compile_seconds:.3f}",
        "-" if outcome.recompilations is None else str(outcome.recompilations),
        _counts(outcome.kernels_per_call, outcome.kernels_backward, "n/a", split_total=True),
        _counts(outcome.fusions_per_call, outcome.fusions_backward, "-", split_total=False),
    ]


def _counts(count: int | None, backward: int | None, missing: str, split_total: bool) -> str:
    """'7', or 'forward+backward' ('3+4') when the backward was counted; `split_total`: `count`
    is the whole step's (kernels) rather than the forward's (fusions)."""
    if count is None:
        return missing
    if backward is None:
        return str(count)
    forward = count - backward if split_total else count
    return f"{forward}+{backward}"


_OPTIONAL_COLUMNS: list[tuple[str, Callable[[Outcome], Any], Callable[[Any], str]]] = [
    ("peak dev", lambda o: o.peak_device_bytes, lambda size: format_bytes(size)),
    ("peak RSS", lambda o: o.peak_host_rss_bytes, lambda size: format_bytes(size)),
    ("tokens/s", lambda o: o.tokens_per_second, lambda rate: f"{rate:,.0f}"),
]


def render(outcomes: Sequence[Outcome]) -> str:
    """The table as text; case and params are printed once per group of consecutive rows. Optional
    columns (memory, tokens/s) follow where some outcome has a value."""
    rows = [row_cells(o) for o in outcomes]
    headers = HEADERS
    for header, value_of, text_of in _OPTIONAL_COLUMNS:
        if not any(value_of(o) is not None for o in outcomes):
            continue
        for row, outcome in zip(rows, outcomes):
            if len(row) == len(headers):
                value = value_of(outcome)
                row.append("-" if value is None else text_of(value))
        headers = [*headers, header]
    shown: list[list[str]] = []
    last_key: tuple[str, str] | None = None
    for row in rows:
        key = (row[0], row[1])
        shown.append(["", "", *row[2:]] if key == last_key else row)
        last_key = key
    widths = [len(h) for h in headers]
    for row in shown:
        if len(row) == len(headers):
            widths = [max(w, len(cell)) for w, cell in zip(widths, row)]
        else:
            widths[:3] = [max(w, len(cell)) for w, cell in zip(widths[:3], row[:3])]
    lines = [_line(headers, widths), "  ".join("-" * w for w in widths)]
    lines += [_line(row, widths) for row in shown]
    return "\n".join(line.rstrip() for line in lines)


def _line(cells: list[str], widths: list[int]) -> str:
    parts = []
    for index, cell in enumerate(cells):
        if index == len(cells) - 1 and len(cells) < len(widths):
            parts.append(cell)  # a status message runs across the numeric columns
        elif index >= _NUMERIC_FROM:
            parts.append(cell.rjust(widths[index]))
        else:
            parts.append(cell.ljust(widths[index]))
    return "  ".join(parts)
