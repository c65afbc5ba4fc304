"""duplicate_upcasts: an upcast read by several fusible prims becomes one upcast per reader.

Assumes: a flattened, pure trace, right before `fuse`, its conversion and reshape chains folded
(`fold_conversions` runs first: `x.float().to(bf16).float()` of a bf16 `x` is `x.float()`), so
that the upcasts found are those of the values the program reads. Guarantees: every `convert_element_type`
to a wider dtype read by more than one elementwise, reduction or shape prim gets a copy per such
reader after the first (same source, same dtype, placed just before the reader); values are
unchanged, and readers of other kinds (a matmul, the trace's output) keep the original.

Why: cse merges the `x.float()` of an RMSNorm and of the residual add after attention into one
float32 value. When `fuse` puts those readers in different regions, that value crosses between
them as a float32 tensor: written by one region and read by the other, twice the bytes of the
bf16 `x` both could read instead (in a Llama block's forward, 134 MB written and read again).
With a copy per reader, an upcast of a value no region computes (a trace input, a matmul's
output) joins its reader's region, which reads the narrow value. (An upcast of a value a region
computes still joins that region, as `fuse` merges producers first.) A region holding several
copies computes the same conversion twice, which costs nothing next to a pass over memory.
"""

from __future__ import annotations

from typing import Any

from compiler.core.context import TraceContext
from compiler.core.ir import BoundSymbol, Proxy, TensorProxy, Trace, map_proxies
from compiler.passes import trace_pass
from compiler.prims import ELEMENTWISE, REDUCTIONS, SHAPE_OPS, Prim

_FUSIBLE_READERS = ELEMENTWISE | REDUCTIONS | SHAPE_OPS


def is_upcast(bsym: BoundSymbol) -> bool:
    """Whether `bsym` converts a tensor to a wider dtype."""
    if bsym.sym is not Prim.CONVERT_ELEMENT_TYPE:
        return False
    source, dtype = bsym.args[0], bsym.args[1]
    return (
        isinstance(source, TensorProxy)
        and isinstance(bsym.output, TensorProxy)
        and bsym.output.dtype.itemsize > source.dtype.itemsize
        and dtype == bsym.output.dtype
    )


@trace_pass("duplicate_upcasts")
def duplicate_upcasts(trace: Trace) -> Trace:
    """The trace with a copy of each shared upcast for every fusible reader after its first."""
    fusible_readers: dict[str, int] = {}
    for bsym in trace.bsyms:
        if bsym.sym in _FUSIBLE_READERS:
            for name in {p.name for p in bsym.inputs}:
                fusible_readers[name] = fusible_readers.get(name, 0) + 1
    shared = {b.output.name: b for b in trace.bsyms if is_upcast(b) and fusible_readers.get(b.output.name, 0) > 1}
    if not shared:
        return trace.with_bsyms(list(trace.bsyms))
    context = TraceContext(reserved=trace.names())
    first_reader_seen: set[str] = set()
    bsyms: list[BoundSymbol] = []
    for bsym in trace.bsyms:
        copies: dict[str, Proxy] = {}
        if bsym.sym in _FUSIBLE_READERS:
            for name in dict.fromkeys(p.name for p in bsym.inputs if p.name in shared):
                if name not in first_reader_seen:
                    first_reader_seen.add(name)
                    continue
                original = shared[name].output
                copy = TensorProxy(original.shape, original.dtype, original.device, name=context.fresh(name))
                bsyms.append(shared[name].replace(output=copy))
                copies[name] = copy
        if copies:

            def substitute(value: Any, copies: dict[str, Proxy] = copies) -> Any:
                return map_proxies(value, lambda q: copies.get(q.name, q))

            bsym = bsym.replace(args=substitute(bsym.args), kwargs=substitute(bsym.kwargs))
        bsyms.append(bsym)
    return trace.with_bsyms(bsyms)
