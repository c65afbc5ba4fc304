"""drop_stop_gradients: `stop_gradient` lines removed once differentiation no longer needs them.

`prims.stop_gradient(x)` (eager's `detach`, and the max shift of softmax-like ops) only tells
autodiff that no gradient flows through it; its value is `x`. `prims.updated_without_grad(x, old)`
(a tensor written where autograd does not record) only tells it that the gradient goes to `old`,
and `prims.overwritten(x, old)` (a tensor written where it does) that `old` gets a zero one; their
value is `x` too: all are `GRADIENT_MARKERS`, and what follows holds for each. Kept, a marker would
stand between fusible prims and make the min-cut count a copy of `x`. So once the joint trace is
built (and, without autograd, right after the pure passes), every reader of a marker reads `x`.

Assumes: a flattened trace. Guarantees: the only marker lines left are `stop_gradient`s that define
values the trace returns (a returned detached tensor is a new tensor object, as in eager; a
returned tensor's new contents become one too, no longer reading `old`); nothing else reads them.
Values and order of the other lines are unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from compiler.core.ir import BoundSymbol, Proxy, Trace, map_proxies, proxies_in
from compiler.passes import trace_pass
from compiler.passes.dce import dce
from compiler.prims import GRADIENT_MARKERS, Prim

# markers of a tensor's new contents (`updated_without_grad`, `overwritten`): returned, a `stop_gradient` of them
_VALUE_MARKERS = GRADIENT_MARKERS - {Prim.STOP_GRADIENT}


def without_stop_gradients(bsyms: Sequence[BoundSymbol], output: Any) -> list[BoundSymbol]:
    """`bsyms` reading each `stop_gradient`'s input instead of its output, the lines of the
    `stop_gradient`s that `output` does not return left out."""
    returned = {id(p) for p in proxies_in(output)}
    replacement: dict[int, Proxy] = {}
    kept: list[BoundSymbol] = []
    for bsym in bsyms:
        if replacement and any(id(p) in replacement for p in bsym.inputs):
            swap = lambda p: replacement.get(id(p), p)
            bsym = bsym.replace(args=map_proxies(bsym.args, swap), kwargs=map_proxies(bsym.kwargs, swap))
        if bsym.sym in GRADIENT_MARKERS:
            replacement[id(bsym.output)] = bsym.args[0]
            if id(bsym.output) not in returned:
                continue
            if bsym.sym in _VALUE_MARKERS:
                # a returned marker of a tensor's new contents is those contents, as a tensor object
                # of its own: a `stop_gradient`, which no longer keeps the old contents alive
                bsym = bsym.replace(sym=Prim.STOP_GRADIENT, args=bsym.args[:1])
        kept.append(bsym)
    return kept


@trace_pass("drop_stop_gradients")
def drop_stop_gradients(trace: Trace) -> Trace:
    """The trace without the `stop_gradient` lines it does not need (see the module)."""
    if not any(b.sym in GRADIENT_MARKERS for b in trace.bsyms):
        return trace
    returned = {id(p) for p in proxies_in(trace.output)}
    result = trace.with_bsyms(without_stop_gradients(trace.bsyms, trace.output))
    # NOTE: a returned tensor's new contents no longer read its old ones, which may now be dead
    rewritten = any(b.sym in _VALUE_MARKERS and id(b.output) in returned for b in trace.bsyms)
    return dce(result) if rewritten else result
