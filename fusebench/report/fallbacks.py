"""The lines `fusebench run` prints after its summary about fallbacks: the measurements in which our
compiler ran pieces of the program eagerly (what the dynamo backend split out, graph breaks) or
ran fusion regions with torch because their fusion compiler failed on them (nvFuser or Inductor).

Such a measurement times less of our compiler's work than its name says: these lines name it, and
the warnings of the run (one per region or piece) say what failed.
"""

from __future__ import annotations

from collections.abc import Sequence

from fusebench.cases.case import format_params
from fusebench.cases.variants import is_ours
from fusebench.measure.outcome import Outcome


def render_fallbacks(outcomes: Sequence[Outcome]) -> str:
    """One line per measurement of our compiler that counted fallbacks, under a heading; '' when none did."""
    hit = [o for o in outcomes if is_ours(o.variant) and o.fallbacks]
    if not hit:
        return ""
    lines = [
        f"fallbacks: {len(hit)} measurement{'s' if len(hit) != 1 else ''} of our compiler ran pieces eagerly or "
        "fusion regions with torch (the run's warnings say what failed):"
    ]
    for o in hit:
        lines.append(f"  {o.case} {format_params(o.params)} {o.variant}: {o.fallbacks}")
    return "\n".join(lines)
