"""batch_regions: same-structure regions over small tensors become one batched fusion.

Assumes: a fused trace (`fuse`): each region is an `nvFusionN` bound symbol whose callable has the
`Region` (`.region`) and whose subsymbols are its prims; the fusion executor makes a batch's
callable (`batch_impl`; without it nothing is batched).
Guarantees: regions that
- only write back into their inputs (no returned values),
- are made of elementwise prims over tensors that all have one static shape of at most
  `FusionOptions.batch_numel` elements (and of broadcasts of 0-d inputs to it: numbers read from
  device scalars, which the members share as they share number inputs),
- and have the same structure (prims, constants, dtypes, device, the same scalar and 0-d inputs),
become ONE batch bound symbol (`nvBatchN`, `inductorBatchN`: `FusionExecutor.batch_prefix`: their
common region over their inputs laid end to end, executors/nvfuser/run/batch.py; or, where the
executor's `batch_flat` is off, one region of all their prims) at the place of the first of
them, with the regions as its subsymbols, when each can move there: it neither reads nor writes
memory (a buffer or a view of it) that a bound symbol it moves past, or another member, writes,
and writes nothing those read. The result runs to the same values: every member reads its
inputs before any member's write-back lands, and no member reads what another writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from compiler.core.executor import Executor, Region, fusion_executor
from compiler.core.ir import BoundSymbol, NumberProxy, Symbol, TensorProxy, Trace, map_proxies, size_product
from compiler.passes import trace_pass
from compiler.prims import ELEMENTWISE, VIEWS, Prim


def _region(bsym: BoundSymbol) -> Region | None:
    region = getattr(getattr(bsym.sym, "impl", None), "region", None)
    return region if isinstance(bsym.sym, Symbol) and isinstance(region, Region) else None


def shared_scalars(region: Region) -> set[str]:
    """The names of the region's 0-d tensor inputs (a learning rate or a bias correction read from a
    device scalar), which the members of a batch share as they share number inputs."""
    return {p.name for p in region.inputs if isinstance(p, TensorProxy) and p.shape == ()}


def _spreads(bsym: BoundSymbol, shared: set[str]) -> bool:
    """Whether `bsym` broadcasts one of the `shared` 0-d inputs to the region's shape."""
    return bsym.sym is Prim.BROADCAST_IN_DIM and isinstance(bsym.args[0], TensorProxy) and bsym.args[0].name in shared


def batch_key(region: Region, limit: int) -> str | None:
    """The structure shared by the regions that can batch with `region` (prims with positional
    names, constants, dtypes, device, written inputs, scalar input names), or None when it cannot."""
    if region.outputs or not region.written:
        return None
    shared = shared_scalars(region)
    if not all(b.sym in ELEMENTWISE or b.sym is Prim.COPY_TO or _spreads(b, shared) for b in region.bsyms):
        return None
    tensors = [p for p in region.inputs if isinstance(p, TensorProxy) and p.name not in shared]
    tensors += [p for b in region.bsyms for p in b.outputs if isinstance(p, TensorProxy)]
    if not tensors or any(not isinstance(p, TensorProxy | NumberProxy) for p in region.inputs):
        return None
    shape, device = tensors[0].shape, tensors[0].device
    if any(p.shape != shape or p.device != device for p in tensors) or not all(type(s) is int for s in shape):
        return None
    if size_product(shape) > limit:
        return None
    names: dict[str, str] = {}
    for k, p in enumerate(region.inputs):
        names[p.name] = f"in{k}:{p.dtype}" if isinstance(p, TensorProxy) and p.name not in shared else p.name
    lines = [f"{device.type} written={sorted(names[n] for n in region.written)}"]
    for b in region.bsyms:
        for p in b.outputs:
            names.setdefault(p.name, f"v{len(names)}:{p.dtype}")
        args = map_proxies(b.args if not _spreads(b, shared) else (b.args[0], "shape", []), lambda p: names[p.name])
        lines.append(f"{[names[p.name] for p in b.outputs]} = {b.sym.value}{args!r}")
    return "\n".join(lines)


class _Memory:
    """Which memory each bound symbol of a trace reads and writes: proxy names, a view made
    outside any region counted as the buffer it views."""

    def __init__(self, trace: Trace) -> None:
        self.root: dict[str, str] = {}
        for b in trace.bsyms:
            if b.sym in VIEWS and b.args and isinstance(b.args[0], TensorProxy):
                for p in b.outputs:
                    self.root[p.name] = self.of(b.args[0].name)

    def of(self, name: str) -> str:
        return self.root.get(name, name)

    def reads(self, bsym: BoundSymbol) -> set[str]:
        return {self.of(p.name) for p in bsym.inputs}

    def writes(self, bsym: BoundSymbol) -> set[str]:
        region = _region(bsym)
        if region is not None:
            return {self.of(n) for n in region.written} | {self.of(p.name) for p in bsym.outputs}
        if bsym.sym is Prim.COPY_TO or bsym.sym is Prim.COPY_:
            return {self.of(bsym.args[1].name if bsym.sym is Prim.COPY_TO else bsym.args[0].name)}
        return {self.of(p.name) for p in bsym.outputs}


def _movable(bsyms: Sequence[BoundSymbol], indices: list[int], memory: _Memory) -> list[int]:
    """The indices (the first, then each later one that can move up to it) of one batch: a later
    one moves past every bound symbol between, members left in place included."""
    first = indices[0]
    chosen = [first]
    read, written = set(memory.reads(bsyms[first])), set(memory.writes(bsyms[first]))  # the chosen
    passed_read: set[str] = set()
    passed_written: set[str] = set()
    seen = first + 1
    for i in indices[1:]:
        for b in bsyms[seen:i]:  # not chosen: what it reads and writes stays where it is
            passed_read |= memory.reads(b)
            passed_written |= memory.writes(b)
        seen = i + 1
        mine_read, mine_written = memory.reads(bsyms[i]), memory.writes(bsyms[i])
        others_read, others_written = read | passed_read, written | passed_written
        if mine_read & others_written or mine_written & (others_read | others_written):
            passed_read |= mine_read
            passed_written |= mine_written
            continue
        chosen.append(i)
        read |= mine_read
        written |= mine_written
    return chosen


def _batch(members: Sequence[BoundSymbol], name: str, fuser: Any) -> BoundSymbol:
    regions = [_region(b) for b in members]
    if not fuser.batch_flat:
        return _union(members, regions, name, fuser)
    first = regions[0]
    shared = shared_scalars(first)
    shapes = [next(p for p in r.inputs if isinstance(p, TensorProxy) and p.name not in shared).shape for r in regions]
    numels = [size_product(shape) for shape in shapes]
    numel = sum(numels)

    flat: dict[str, TensorProxy] = {}

    def to_flat(p: Any) -> Any:
        if not isinstance(p, TensorProxy) or p.name in shared:
            return p
        if p.name not in flat:
            flat[p.name] = TensorProxy((numel,), p.dtype, p.device, name=p.name)
        return flat[p.name]

    bsyms = tuple(
        b.replace(
            args=(b.args[0], [numel], []) if _spreads(b, shared) else map_proxies(b.args, to_flat),
            kwargs=map_proxies(b.kwargs, to_flat),
            output=map_proxies(b.output, to_flat),
        )
        for b in first.bsyms
    )
    region = Region(name, bsyms, tuple(to_flat(p) for p in first.inputs), (), first.written)
    impl = fuser.batch_impl(region, numels, all(len(shape) == 1 for shape in shapes))
    args = tuple(p for r in regions for p in r.inputs)
    return BoundSymbol(Symbol(name, impl, fuser.name), args, {}, (), tuple(members))


def _union(members: Sequence[BoundSymbol], regions: Sequence[Region], name: str, fuser: Any) -> BoundSymbol:
    """The members as one region holding all their prims, reading each input once (a scalar they
    share, a step count, is one input)."""
    inputs = tuple({p.name: p for r in regions for p in r.inputs}.values())
    written = frozenset().union(*(r.written for r in regions))
    region = Region(name, tuple(b for r in regions for b in r.bsyms), inputs, (), written)
    return BoundSymbol(Symbol(name, fuser.region_impl(region), fuser.name), inputs, {}, (), tuple(members))


@trace_pass("batch_regions")
def batch_regions(trace: Trace, executors: Sequence[Executor]) -> Trace:
    """The trace with each batch of same-structure small regions run as one fusion call."""
    fuser = fusion_executor(executors)
    bsyms = list(trace.bsyms)
    limit = fuser.options.batch_numel if fuser is not None and fuser.batches else 0
    if not limit:
        return trace.with_bsyms(bsyms)
    by_key: dict[str, list[int]] = {}
    for i, b in enumerate(bsyms):
        region = _region(b)
        key = batch_key(region, limit) if region is not None and b.sym.executor == fuser.name else None
        if key is not None:
            by_key.setdefault(key, []).append(i)
    memory = _Memory(trace)
    placed: dict[int, BoundSymbol] = {}
    dropped: set[int] = set()
    for indices in by_key.values():
        while len(indices) > 1:
            chosen = _movable(bsyms, indices, memory)
            if len(chosen) > 1:
                placed[chosen[0]] = _batch([bsyms[i] for i in chosen], f"{fuser.batch_prefix}{len(placed)}", fuser)
                dropped.update(chosen[1:])
            indices = [i for i in indices if i not in chosen]
    return trace.with_bsyms([placed.get(i, b) for i, b in enumerate(bsyms) if i not in dropped])
