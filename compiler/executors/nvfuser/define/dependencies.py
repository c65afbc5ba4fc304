"""What a value of a fusion region is computed from, inside the region: the questions the
definition writer (`translations`) asks before it places a segment boundary nvFuser needs."""

from __future__ import annotations

from collections.abc import Callable, Collection

from compiler.core.executor import Region
from compiler.core.ir import BoundSymbol, TensorProxy
from compiler.prims import REDUCTIONS, Prim


def producer_of(region: Region, p: TensorProxy) -> BoundSymbol | None:
    """The bound symbol of `region` that computes `p`, or None (a region input)."""
    return next((b for b in region.bsyms if any(q is p for q in b.outputs)), None)


def sliced_source(region: Region, p: TensorProxy) -> TensorProxy | None:
    """The tensor `p` was sliced from inside `region`, or None."""
    producer = producer_of(region, p)
    return producer.args[0] if producer is not None and producer.sym is Prim.SLICE else None


def reduced_inside(region: Region, p: TensorProxy) -> bool:
    """Whether `p` is the output of a reduction inside `region`, or a conversion of one (which the
    definition may hold as the reduction's own value)."""
    producer = producer_of(region, p)
    while producer is not None and producer.sym is Prim.CONVERT_ELEMENT_TYPE:
        producer = producer_of(region, producer.args[0])
    return producer is not None and producer.sym in REDUCTIONS


def has_cat(region: Region) -> bool:
    """Whether `region` has a cat."""
    return any(b.sym is Prim.CAT for b in region.bsyms)


def computed_from(
    region: Region,
    p: TensorProxy,
    prims: Collection[Prim],
    leaf: Callable[[TensorProxy], bool] | None = None,
    names: Collection[str] = (),
) -> bool:
    """Whether `p` is computed inside `region` from one of `prims` (through any number of prims),
    from one of the values `names`, or, with `leaf`, from a value made outside the region (an
    input) for which `leaf` holds."""
    producers = {q.name: b for b in region.bsyms for q in b.outputs}
    seen, todo = set(), [p]
    while todo:
        value = todo.pop()
        if value.name in names:
            return True
        b = producers.get(value.name)
        if b is None and leaf is not None and leaf(value):
            return True
        if b is None or id(b) in seen:
            continue
        if b.sym in prims:
            return True
        seen.add(id(b))
        todo.extend(q for q in b.inputs if isinstance(q, TensorProxy))
    return False
