"""Which tensors of a trace the caller gets the memory of: the returned ones and every tensor a
returned view views (through `prims.VIEWS`). Passes that merge values (cse, fold_conversions) keep
two of them apart: eager returns each in memory of its own (`(x * 2, x * 2)`, a returned tensor and
the copy of it a function made), and one merged value would let a write into one change the other."""

from __future__ import annotations

from typing import Any

from compiler.core.ir import Trace, proxies_in
from compiler.prims import views_of


def returned_memory(trace: Trace, output: Any = None) -> set[str]:
    """Names of the tensors whose memory `trace` returns (see the module): of `output`, where
    given, instead of the trace's whole output."""
    viewed = views_of(trace.bsyms)
    names: set[str] = set()
    for p in proxies_in(trace.output if output is None else output):
        while p is not None and p.name not in names:
            names.add(p.name)
            p = viewed.get(p.name)
    return names


FORWARD = "forward"  # the name `split_backward` gives the forward trace it splits off


def shown_output(trace: Trace) -> Any:
    """What the caller of `trace` gets: a forward's outputs without the values it saves for its
    backward (`split_backward` returns `(outputs, saved)`; only the backward reads those, so one may
    be an input or a view of one, as a saved input is), else the trace's whole output."""
    return trace.output[0] if trace.name == FORWARD else trace.output
