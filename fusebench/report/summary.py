"""Our compiler against its best peer, as plain text: the lines `fusebench run` ends with.

For each (case, params) the ratio is the time per call of our `fusebench` variant over the time
of the fastest peer (every variant that is not ours: eager, `torch.compile`, thunder, a case's own
baselines) in the same run; below 1× fusebench is faster. The headline gives the range and the
geometric mean over the (case, params) where both were timed; then one line per (case, params):

    fusebench vs best peer (time per call, < 1× means fusebench is faster): 0.97× ... 2.74×, ...
    gelu_bias_backward  shape=(4, 64, 256), dtype=float32   1.02×  fusebench 278 µs, best peer eager 271 µs
    gelu_autograd       shape=(256, 1024), dtype=float32       -   fusebench unsupported: ...

Where the run timed fusebench and its peers alternately too (`fusebench.measure.paired`, the
default), the ratio is that of the paired samples, the best peer the one fusebench is slowest
against in them, and the line says so ("timed alternately", with the ratio of the two separate
measurements beside it): a machine whose speed changed between the two measurements moves the
separate ratio, not the paired one. A ratio that is noisy says so on its line, and the headline
counts those: such a ratio is no verdict until measured again. A paired ratio is noisy where its
pairs' ratios spread more than `SPREAD_THRESHOLD` (IQR / median); a separate one where either
measurement did (samples spread over plateaus, as on a loaded machine).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

from fusebench.cases.variants import OURS, is_ours
from fusebench.measure.noise import SPREAD_THRESHOLD
from fusebench.report.scoreboard import Cell, Row
from fusebench.report.table import format_seconds, three_digits

MAX_REASON = 80


def format_ratio(ratio: float | None) -> str:
    """'0.97×', '12.3×', '152×' (three significant digits), '0.012×' below 0.1; '-' for None."""
    if ratio is None:
        return "-"
    if round(ratio, 3) < 0.1:
        return f"{ratio:.3f}×"
    return f"{three_digits(ratio)}×"


def best_peer(row: Row) -> Cell | None:
    """The peer our `fusebench` is compared with: where every timed peer was paired with it, the one
    it is slowest against in the paired samples; otherwise the fastest peer."""
    fastest = row.fastest(peers_only=True)
    ours = row.cells.get(OURS)
    if fastest is None or ours is None or not ours.timed:
        return fastest
    timed = [cell for cell in row.cells.values() if cell.timed and not is_ours(cell.variant)]
    paired = {cell.variant: row.paired(OURS, cell.variant) for cell in timed}
    if any(value is None for value in paired.values()):
        return fastest
    return max(timed, key=lambda cell: paired[cell.variant][0])  # type: ignore[index]


def peer_ratio(row: Row) -> float | None:
    """Our `fusebench` time over its best peer's in `row` (from paired samples where they were
    taken), or None when either has no time."""
    ours, peer = row.cells.get(OURS), best_peer(row)
    if ours is None or not ours.timed or peer is None:
        return None
    paired = row.paired(OURS, peer.variant)
    return paired[0] if paired is not None else float(ours.seconds) / float(peer.seconds)  # type: ignore[arg-type]


def headline(rows: Sequence[Row]) -> str:
    """'fusebench vs best peer (...): 0.97× ... 2.74×, geometric mean 1.40×, over 9 (case, params); ...'."""
    with_ours = [row for row in rows if OURS in row.cells]
    ratios = [ratio for ratio in map(peer_ratio, with_ours) if ratio is not None]
    text = f"{OURS} vs best peer (time per call, < 1× means {OURS} is faster): "
    if not ratios:
        return text + f"no (case, params) has both a {OURS} time and a peer's time"
    mean = math.exp(sum(map(math.log, ratios)) / len(ratios))
    faster = sum(ratio < 1 for ratio in ratios)
    compared = [row for row in with_ours if peer_ratio(row) is not None]
    noisy = sum(bool(noise(row)) for row in compared)
    paired = sum(_pairing(row) is not None for row in compared)
    return (
        text + f"{format_ratio(min(ratios))} ... {format_ratio(max(ratios))}, geometric mean {format_ratio(mean)}, "
        f"over {len(ratios)} of {len(with_ours)} (case, params); {OURS} is faster in {faster}"
        + (f"; {paired} of the ratios from samples timed alternately" if paired else "")
        + (f"; {noisy} of the ratios noisy (IQR above {SPREAD_THRESHOLD:.0%} of the median)" if noisy else "")
    )


def noise(row: Row) -> str:
    """Why the row's ratio is noisy ('' where it is not): the paired samples' spread, or the
    spread of our measurement or the best peer's, above `SPREAD_THRESHOLD`."""
    pairing = _pairing(row)
    if pairing is not None:
        spread = pairing[1]
        return f"of the pairs' ratios {spread:.0%}" if spread is not None and spread > SPREAD_THRESHOLD else ""
    cells = [row.cells.get(OURS), best_peer(row)]
    noisy = [c for c in cells if c is not None and c.timed and c.spread is not None and c.spread > SPREAD_THRESHOLD]
    return ", ".join(f"{c.variant} {c.spread:.0%}" for c in noisy)


def _pairing(row: Row) -> tuple[float, float | None] | None:
    peer = best_peer(row)
    return None if peer is None or OURS not in row.cells else row.paired(OURS, peer.variant)


def render_summary(rows: Sequence[Row]) -> str:
    """The headline and one line per (case, params) that has a `fusebench` cell; '' when none has."""
    with_ours = [row for row in rows if OURS in row.cells]
    if not with_ours:
        return ""
    lines = [[row.case, row.params, format_ratio(peer_ratio(row)), _comparison(row)] for row in with_ours]
    widths = [max(len(line[i]) for line in lines) for i in range(3)]
    body = [
        f"{case.ljust(widths[0])}  {params.ljust(widths[1])}  {ratio.rjust(widths[2])}  {text}"
        for case, params, ratio, text in lines
    ]
    return "\n".join([headline(with_ours), *body])


def _comparison(row: Row) -> str:
    ours, peer = row.cells[OURS], best_peer(row)
    if not ours.timed:
        return f"{OURS} {_status(ours)}"
    text = f"{OURS} {format_seconds(ours.seconds)}, "
    if peer is None:
        return text + "no peer timed"
    text += f"best peer {peer.variant} {format_seconds(peer.seconds)}"
    if (pairing := _pairing(row)) is not None:
        apart = float(ours.seconds) / float(peer.seconds)  # type: ignore[arg-type]
        text += f"; timed alternately {format_ratio(pairing[0])} (measured apart {format_ratio(apart)})"
    if why := noise(row):
        text += f"  (noisy: IQR / median {why}; measure again for a verdict)"
    return text


def _status(cell: Cell) -> str:
    reason = cell.detail.replace(os.getcwd() + os.sep, "").replace("\n", " ")
    if len(reason) > MAX_REASON:
        reason = reason[: MAX_REASON - 3] + "..."
    return f"{cell.status}: {reason}" if reason else cell.status
