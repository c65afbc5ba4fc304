"""flatten: replaces every torch-level op by the prims of its decomposition.

Assumes: op bound symbols carry their decomposition as subsymbols (the frontend guarantees it).
Guarantees: the result holds only prims and executor regions; values and names are unchanged.
"""

from __future__ import annotations

from compiler.core.ir import BoundSymbol, Symbol, Trace
from compiler.passes import trace_pass


def _flat(bsyms: list[BoundSymbol] | tuple[BoundSymbol, ...]) -> list[BoundSymbol]:
    result: list[BoundSymbol] = []
    for bsym in bsyms:
        if isinstance(bsym.sym, Symbol) and bsym.sym.impl is None:
            result += _flat(bsym.subsymbols)
        else:
            result.append(bsym)
    return result


@trace_pass("flatten")
def flatten(trace: Trace) -> Trace:
    """The trace with torch-level ops lowered to prims."""
    return trace.with_bsyms(_flat(trace.bsyms))
