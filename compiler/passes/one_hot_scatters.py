"""one_hot_scatters: for nvFuser, a scatter-add of a few columns into a tensor becomes that tensor
plus a one-hot mask per column, elementwise over the tensor, so that it fuses.

A gather's gradient (`take_along_dim`'s: a cross-entropy's target logits) is a scatter-add into
the other terms of the gradient (`autodiff`): cheap where it runs as a loop (eager, Inductor),
but nvFuser fuses no scatter, and as a torch op it would copy the whole gradient and split the
fusion that computes it. Where the index has the tensor's sizes off the scattered dim and a
constant, small count along it, each column instead adds its values where the class iota equals
its index: `x + where(iota == index[..., j], src[..., j], 0)`, in column order.

Assumes: a pure, flattened trace. Guarantees: the same values: each element gets its own value
plus each value scattered to it, one rounding per column in the tensor's dtype, as torch's
scatter-add rounds each addition; an element nothing is scattered to keeps its value.
"""

from __future__ import annotations

from compiler import prims
from compiler.core.context import TraceContext, tracing
from compiler.core.ir import BoundSymbol, TensorProxy, Trace
from compiler.core.proxies import same_extent
from compiler.passes import trace_pass
from compiler.passes.vjp_structural import slice_index
from compiler.prims import Prim

MAX_COLUMNS = 8  # NOTE: each column is a full-size compare, select and add: more read the tensor too often


def _one_hot(bsym: BoundSymbol) -> bool:
    """Whether `bsym` is a scatter-add this pass rewrites."""
    if bsym.sym is not Prim.SCATTER_REDUCE:
        return False
    a, dim, index, _, reduce, include_self = bsym.args
    columns = index.shape[dim]
    return (
        reduce == "sum"
        and include_self is True
        and isinstance(columns, int)
        and 0 < columns <= MAX_COLUMNS
        and all(same_extent(index.shape[d], a.shape[d]) for d in range(a.ndim) if d != dim)
    )


def one_hot_scatters(trace: Trace) -> Trace:
    """`trace` with each small scatter-add (`_one_hot`) written as one-hot masks added to the
    tensor; `trace` itself where it has none."""
    if not any(_one_hot(b) for b in trace.bsyms):
        return trace
    return _rewritten(trace)


@trace_pass("one_hot_scatters")
def _rewritten(trace: Trace) -> Trace:
    context = TraceContext(reserved=trace.names())
    bsyms: list[BoundSymbol] = []
    with tracing(context):
        for bsym in trace.bsyms:
            if not _one_hot(bsym):
                bsyms.append(bsym)
                continue
            with context.scope() as added:
                last = _added_columns(bsym)
            bsyms += [*added, last]
    return trace.with_bsyms(bsyms)


def _added_columns(bsym: BoundSymbol) -> BoundSymbol:
    """Records each column's one-hot mask and the additions of all but the last; returns the last
    addition unrecorded, with the scatter's output as its own (what reads it reads the sum)."""
    a, dim, index, src, _, _ = bsym.args
    shape, others = list(a.shape), [d for d in range(a.ndim) if d != dim]
    classes = prims.broadcast_in_dim(prims.iota(a.shape[dim], 0, 1, index.dtype, a.device), shape, [dim])
    terms = []
    for j in range(index.shape[dim]):
        column, values = slice_index(index, dim, j), slice_index(src, dim, j)
        hit = prims.eq(classes, prims.broadcast_in_dim(column, shape, others))
        terms.append(prims.where(hit, prims.broadcast_in_dim(values, shape, others), 0.0))
    total: TensorProxy = a
    for term in terms[:-1]:
        total = prims.add(total, term)
    return BoundSymbol(Prim.ADD, (total, terms[-1]), {}, bsym.output)
