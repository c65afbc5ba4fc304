"""expanded_inputs: a region that writes back into its inputs reads broadcasts of its other inputs
already expanded, made by torch before it runs.

Assumes: a fused trace (`fuse`, then `batch_regions`): regions are bound symbols whose callable
has the `Region` (`.region`) and whose subsymbols are its prims.
Guarantees: in each region of a fusion executor with `expands_inputs` (nvFuser) that writes back
into an input, each `q = broadcast_in_dim(p, ...)` of a region input `p` the trace does not write,
whose `q` only elementwise prims of the region read (not returned, not written back), is made
outside the region, just before it (torch's broadcast is a view: no kernel, no copy), and the
region reads `q` instead, as an expanded tensor (stride-0 dims). `p` stays an input only where
another prim of the region reads it. Values are unchanged.

Why: nvfuser_direct 0.2.36 splits a fusion that writes into an input (`alias_input`) a value
computed from a broadcast made inside the fusion: the value goes to a temporary and a second
kernel copies it into the input, which moves the written tensor twice more (an Adam update reading
its learning rate and bias corrections from device scalars, as under CUDA graphs: every parameter's
update 2 kernels, the second a quarter of the first's time). The same fusion reading an input that
is already a broadcast (size-1 or stride-0 dims) is one kernel.
"""

from __future__ import annotations

from collections.abc import Sequence

from compiler.core.executor import Executor, Region, fusion_executor
from compiler.core.ir import BoundSymbol, Symbol, TensorProxy, Trace
from compiler.passes import trace_pass
from compiler.prims import ELEMENTWISE, Prim


def hoistable(region: Region) -> list[BoundSymbol]:
    """The broadcasts of `region`'s inputs that it can read expanded (see the module doc): none
    unless the region writes back into an input."""
    if not region.written:
        return []
    inputs = {p.name for p in region.inputs if isinstance(p, TensorProxy)} - set(region.written)
    returned = {p.name for p in region.outputs}
    readers: dict[str, list[BoundSymbol]] = {}
    for b in region.bsyms:
        for p in b.inputs:
            readers.setdefault(p.name, []).append(b)
    return [
        b
        for b in region.bsyms
        if b.sym is Prim.BROADCAST_IN_DIM
        and isinstance(b.args[0], TensorProxy)
        and b.args[0].name in inputs
        and b.output.name not in returned
        and readers.get(b.output.name)
        and all(r.sym in ELEMENTWISE for r in readers[b.output.name])
    ]


def without(region: Region, hoisted: Sequence[BoundSymbol]) -> Region:
    """`region` without the `hoisted` broadcasts, reading their outputs as inputs instead."""
    gone = {id(b) for b in hoisted}
    kept = [b for b in region.bsyms if id(b) not in gone]
    returned = {id(p) for p in region.outputs}
    made = Region.of(region.name, kept, lambda key: key in returned, region.written)
    return Region(region.name, made.bsyms, made.inputs, region.outputs, made.written)


@trace_pass("expanded_inputs")
def expanded_inputs(trace: Trace, executors: Sequence[Executor]) -> Trace:
    """The trace with each writing region of an `expands_inputs` fusion executor reading the
    broadcasts of its inputs already expanded."""
    fuser = fusion_executor(executors)
    if fuser is None or not fuser.expands_inputs:
        return trace.with_bsyms(list(trace.bsyms))
    bsyms: list[BoundSymbol] = []
    for b in trace.bsyms:
        region = getattr(getattr(b.sym, "impl", None), "region", None)
        hoisted = hoistable(region) if isinstance(region, Region) and b.sym.executor == fuser.name else []
        if not hoisted:
            bsyms.append(b)
            continue
        smaller = without(region, hoisted)
        bsyms += hoisted
        impl = fuser.region_impl(smaller)
        bsyms.append(BoundSymbol(Symbol(smaller.name, impl, fuser.name), smaller.inputs, {}, b.output, smaller.bsyms))
    return trace.with_bsyms(bsyms)
