"""expanded_inputs: a region that writes back into its inputs reads broadcasts of its other inputs
already expanded, made by torch before it runs.

Assumes: a fused trace (`fuse`, then `batch_regions`): regions are bound symbols whose callable
has the `Region` (`.region`) and whose subsymbols are its prims.
Guarantees: in each region of a fusion executor with `expands_inputs` (nvFuser) that writes back
into an input, each `q = broadcast_in_dim(p, ...)` of a region input `p` the trace does not write,
whose `q` only elementwise prims of the region read (not returned, not written back), is made
outside the region, just before it (torch's broadcast is a view: no kernel, no copy), and the
region reads `q` instead, as an expanded tensor (stride-0 dims). `p` stays an input only where
another prim of the region reads it. Before that, a broadcast of a value the region computes by
elementwise prims from such inputs alone (`w.exp()`, a 0-d learning rate's `-lr * 2`) is made of
those inputs' broadcasts instead, the prims then computing at the broadcast's shape (`lifted`), and
what two such rewrites made alike is made once (`cse`): two copies of one broadcast would be two
inputs of the fusion, and parts of a fusion joined by no input are nvFuser kernels of their own.
Values are unchanged.

Why: nvfuser_direct 0.2.36 splits a fusion that writes into an input (`alias_input`) a value
computed from a broadcast made inside the fusion: the value goes to a temporary and a second
kernel copies it into the input, which moves the written tensor twice more (an Adam update reading
its learning rate and bias corrections from device scalars, as under CUDA graphs: every parameter's
update 2 kernels, the second a quarter of the first's time). The same fusion reading an input that
is already a broadcast (size-1 or stride-0 dims) is one kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from compiler.core.context import TraceContext
from compiler.core.executor import Executor, Region, fusion_executor
from compiler.core.ir import BoundSymbol, TensorProxy, Trace
from compiler.passes import trace_pass
from compiler.passes.cse import cse
from compiler.passes.dce import live_bsyms
from compiler.passes.fuse import region_bsym
from compiler.prims import ELEMENTWISE, Prim


def _unwritten(region: Region) -> set[str]:
    """The names of `region`'s tensor inputs the trace does not write."""
    return {p.name for p in region.inputs if isinstance(p, TensorProxy)} - set(region.written)


def hoistable(region: Region) -> list[BoundSymbol]:
    """The broadcasts of `region`'s inputs that it can read expanded (see the module doc): none
    unless the region writes back into an input."""
    if not region.written:
        return []
    inputs = _unwritten(region)
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


def lifted(region: Region, fresh: Callable[[str], str]) -> Region:
    """`region` with each broadcast of a value it computes from unwritten inputs by elementwise prims
    alone replaced by those prims over the inputs' broadcasts (whose readers are then elementwise,
    as `hoistable` asks); the computation it replaced is dropped where nothing else reads it. `fresh`
    names the values it makes (a prefix in, a name no value of the trace has out)."""
    if not region.written:
        return region
    inputs = _unwritten(region)
    bsyms = list(region.bsyms)
    for _ in range(len(bsyms)):  # one broadcast per round; each round's prims are the next's
        step = _lift_one(bsyms, inputs, fresh)
        if step is None:
            break
        bsyms = live_bsyms(step, region.outputs)
    if len(bsyms) != len(region.bsyms) or any(a is not b for a, b in zip(bsyms, region.bsyms)):
        merged = cse.__wrapped__(Trace(region.inputs, bsyms, region.outputs))  # type: ignore[attr-defined]
        if all(a is b for a, b in zip(merged.output, region.outputs)):  # NOTE: the trace reads them by name
            bsyms = merged.bsyms
    return Region(region.name, tuple(bsyms), region.inputs, region.outputs, region.written)


def _lift_one(bsyms: list[BoundSymbol], inputs: set[str], fresh: Callable[[str], str]) -> list[BoundSymbol] | None:
    """`bsyms` with the first broadcast of a computed value `lifted` can rewrite rewritten, or None."""
    producer = {id(p): b for b in bsyms for p in b.outputs}

    def spread(p: TensorProxy) -> BoundSymbol | None:
        """The broadcast of an unwritten input that makes `p`, if one does."""
        b = producer.get(id(p))
        is_spread = b is not None and b.sym is Prim.BROADCAST_IN_DIM and isinstance(b.args[0], TensorProxy)
        return b if is_spread and b.args[0].name in inputs else None

    def chain(p: TensorProxy, found: list[BoundSymbol]) -> bool:
        if p.name in inputs or spread(p) is not None:
            return True
        b = producer.get(id(p))
        if b is None or b.sym not in ELEMENTWISE:
            return False
        if not all(chain(a, found) for a in b.args if isinstance(a, TensorProxy)):
            return False
        if b not in found:
            found.append(b)
        return True

    for i, b in enumerate(bsyms):
        source = b.args[0] if b.sym is Prim.BROADCAST_IN_DIM else None
        found: list[BoundSymbol] = []
        if not isinstance(source, TensorProxy) or source.name in inputs or spread(source) is not None:
            continue
        if chain(source, found):
            return [*bsyms[:i], *_over_broadcasts(b, found, spread, fresh), *bsyms[i + 1 :]]
    return None


def _over_broadcasts(
    broadcast: BoundSymbol,
    found: Sequence[BoundSymbol],
    spread: Callable[[TensorProxy], BoundSymbol | None],
    fresh: Callable[[str], str],
) -> list[BoundSymbol]:
    """The elementwise prims `found` (computing `broadcast`'s operand from inputs and broadcasts of
    inputs) over broadcasts of those to `broadcast`'s shape, the last giving its output."""
    source, shape, dims = broadcast.args
    made: dict[int, TensorProxy] = {}
    lines: list[BoundSymbol] = []
    computed = {id(op.output) for op in found}

    def wide(p: TensorProxy) -> TensorProxy:
        if id(p) not in made:
            made[id(p)] = TensorProxy(tuple(shape), p.dtype, p.device, name=fresh(f"{p.name}_"))
            if id(p) not in computed:  # an input, or a broadcast of one: broadcast (again) from the input
                inner = spread(p)
                operand, spread_dims = (p, dims) if inner is None else (inner.args[0], [dims[d] for d in inner.args[2]])
                lines.append(broadcast.replace(args=(operand, shape, spread_dims), output=made[id(p)]))
        return made[id(p)]

    for op in found:
        args = tuple(wide(a) if isinstance(a, TensorProxy) else a for a in op.args)
        lines.append(op.replace(args=args, output=broadcast.output if op.output is source else wide(op.output)))
    return lines


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
    context = TraceContext(reserved=trace.names())
    bsyms: list[BoundSymbol] = []
    for b in trace.bsyms:
        region = getattr(getattr(b.sym, "impl", None), "region", None)
        if isinstance(region, Region) and b.sym.executor == fuser.name:
            region = lifted(region, context.fresh)
        hoisted = hoistable(region) if isinstance(region, Region) and b.sym.executor == fuser.name else []
        if not hoisted:
            bsyms.append(b)
            continue
        smaller = without(region, hoisted)
        bsyms += [*hoisted, region_bsym(smaller, fuser.region_impl(smaller), fuser.name)]
    return trace.with_bsyms(bsyms)
