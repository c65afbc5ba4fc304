"""update_in_place: partial updates of a written-back input done in that input's own memory.

Assumes: a functionalized, flattened (possibly fused) trace whose write-backs follow the
`copy_to` contract (see compiler/tracing/check_writebacks.py).
Guarantees: each `t = index_copy(buf, ...)` (or `index_add`, `slice_update`, `scatter`,
`scatter_reduce`) whose write-back is `copy_to(t, buf)` becomes one call that updates `buf` in
place and returns it as `t`, and the `copy_to` is dropped, provided the update's other
arguments are not views of `buf` and nothing reads `buf` or a view of it after `t` is computed
(the old values would be gone), except returned views of `buf` made after its write-back (they
read the new values), and provided the trace does not return `t` itself, nor a view of it (`t`
is a tensor of its own in eager: `y.copy_(x)` after `x[1:] = v` returns `y`, not `x`). For a KV
cache this replaces a copy of the whole cache plus a write-back of the whole cache by a scatter
of the new rows, which is what eager PyTorch does. A chain of such updates whose last one is
written back (`x[:, 0] = a; x[:, 1] = b`: the second updates the first's result) is done in place
as a whole, under the same conditions for each update (nothing reads a buffer of the chain after
the update that overwrites it): two writes of a column, not two copies of the whole buffer.
Anything else is left as it was.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from typing import Any

import torch

from compiler.core.ir import BoundSymbol, Proxy, Symbol, TensorProxy, Trace, proxies_in
from compiler.passes import trace_pass
from compiler.passes.returned import returned_memory
from compiler.prims import BINARY, FACTORIES, GATHERS, REDUCTIONS, SCANS, UNARY, VIEWS, Prim
from compiler.tracing.check_writebacks import views_after_writebacks


def _slice_update_(buf: torch.Tensor, value: torch.Tensor, starts: Sequence, ends: Sequence, steps: Sequence) -> Any:
    buf[tuple(slice(s, e, st) for s, e, st in zip(starts, ends, steps))] = value
    return buf


_WIDE = (torch.complex128, torch.int64, torch.int32)  # NOTE: 16, 8 and 4 bytes


def wide_rows(buf: torch.Tensor, dim: int, source: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """`buf` and `source` viewed with the block after `dim` as the fewest elements of up to 16 bytes
    (both contiguous there, the block's bytes and both addresses divisible by the width), or None."""
    if buf.dim() < 2 or buf.dim() != source.dim():
        return None
    dim %= buf.dim()
    if dim == buf.dim() - 1 or buf.numel() == 0 or source.numel() == 0 or buf.dtype != source.dtype:
        return None
    for wide in _WIDE:
        if wide.itemsize <= buf.element_size():
            return None
        if any(t.data_ptr() % wide.itemsize for t in (buf, source)):
            continue
        try:  # NOTE: view, never reshape: a copy of `buf` would take the update away from its memory
            return tuple(t.view(*t.shape[: dim + 1], -1).view(wide) for t in (buf, source))  # type: ignore[return-value]
        except RuntimeError:  # not contiguous after `dim`, or not divisible by this width
            continue
    return None


# NOTE: below this many bytes of source the wide kernel saves less device time than `wide_rows`'
# checks and four views cost in host time, which a decode step (host-bound: one token per
# sequence, a cache update per layer) pays in full.
WIDE_MIN_BYTES = 1 << 20


def _index_copy_(buf: torch.Tensor, dim: int, index: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
    """`buf.index_copy_(dim, index, source)`, moving each indexed block after `dim` as elements of up
    to 16 bytes where `wide_rows` allows and the source has `WIDE_MIN_BYTES` or more: ATen's kernel
    moves one element per thread, so a bf16 KV cache's rows of 128 go as 16 elements, not 128: far
    fewer threads and wider memory accesses for a prefill's long cache updates."""
    if source.nbytes < WIDE_MIN_BYTES:
        return buf.index_copy_(dim, index, source)
    wide = wide_rows(buf, dim, source)
    if wide is None:
        return buf.index_copy_(dim, index, source)
    wide[0].index_copy_(dim, index, wide[1])
    return buf


def _index_copy_source(bsym: BoundSymbol, g: Any) -> list[str] | None:
    """`_index_copy_` as the tensor method's own call where the source's size, known when the
    trace is compiled, is below `WIDE_MIN_BYTES` (a decode step's cache update): no Python call
    of its own on the hot path. None, keeping the call, otherwise."""
    buf, dim, index, source = bsym.args
    if not all(isinstance(p, Proxy) for p in (buf, index, source, bsym.output)):
        return None
    static = all(type(n) is int for n in source.shape)
    if not static or math.prod(source.shape) * source.dtype.itemsize >= WIDE_MIN_BYTES:
        return None
    return [f"{bsym.output.name} = {buf.name}.index_copy_({g.source(dim)}, {index.name}, {source.name})"]


_index_copy_.inline_source = _index_copy_source  # type: ignore[attr-defined]


def _scatter_reduce_(
    buf: torch.Tensor, dim: int, index: torch.Tensor, src: torch.Tensor, reduce: str, include_self: bool
) -> torch.Tensor:
    return buf.scatter_reduce_(dim, index, src, reduce, include_self=include_self)


# prim -> (printed name, in-place implementation taking the prim's arguments and returning buf)
IN_PLACE: dict[Prim, tuple[str, Callable]] = {
    Prim.INDEX_COPY: ("index_copy_", _index_copy_),
    Prim.INDEX_ADD: ("torch.Tensor.index_add_", torch.Tensor.index_add_),
    Prim.SLICE_UPDATE: ("slice_update_", _slice_update_),
    Prim.SCATTER: ("torch.Tensor.scatter_", torch.Tensor.scatter_),
    Prim.SCATTER_REDUCE: ("scatter_reduce_", _scatter_reduce_),
}
_SYMBOLS = {prim: Symbol(name, impl) for prim, (name, impl) in IN_PLACE.items()}
# prims whose result is new memory whatever runs them (no executor returns an operand for them):
# math, made tensors (a constant, an arange, random numbers), gathers and a concatenation
_FRESH = UNARY | BINARY | REDUCTIONS | SCANS | FACTORIES | GATHERS | {Prim.WHERE, Prim.CAT}


def _views_returned_beside(region: BoundSymbol, buf: Proxy) -> set[int]:
    """ids of `region`'s other outputs that it makes from `buf` by view prims alone: a region run by
    torch returns them as views of `buf` (a slice of a product saved for the backward)."""
    inner = {id(buf)}
    for sub in region.subsymbols:
        if sub.sym in VIEWS and id(sub.args[0]) in inner:
            inner.update(id(p) for p in sub.outputs)
    return {id(p) for p in region.outputs if id(p) in inner}


def _makes_new_memory(bsym: BoundSymbol) -> bool:
    """Whether every executor writes `bsym`'s result into new memory: math, and a conversion to
    another dtype (`.to` of the same dtype returns its operand)."""
    if bsym.sym is Prim.CONVERT_ELEMENT_TYPE:
        operand = bsym.args[0]
        return isinstance(operand, TensorProxy) and operand.dtype != bsym.output.dtype
    return bsym.sym in _FRESH


def _aliases(bsyms: list[BoundSymbol], buf: Proxy) -> set[int]:
    """ids of `buf` and every value that may share its memory (views, and region outputs fed by it)."""
    aliases = {id(buf)}
    for bsym in bsyms:
        if isinstance(bsym.sym, Symbol) and any(p is buf for p in bsym.outputs):
            aliases |= _views_returned_beside(bsym, buf)
        # NOTE: a view prim aliases its first argument; a region's outputs are assumed to alias
        # its inputs (conservative: a region run by torch may return views), but those its math
        # computes, which every executor writes into memory of their own.
        view_of_alias = bsym.sym in VIEWS and id(bsym.args[0]) in aliases
        region_of_alias = isinstance(bsym.sym, Symbol) and any(id(p) in aliases for p in bsym.inputs)
        if view_of_alias:
            aliases.update(id(p) for p in bsym.outputs)
        elif region_of_alias:
            fresh = {id(p) for sub in bsym.subsymbols if _makes_new_memory(sub) for p in sub.outputs}
            aliases.update(id(p) for p in bsym.outputs if id(p) not in fresh)
    return aliases


def overwritable(bsyms: list[BoundSymbol], i: int, buf: Proxy, skipped: Collection[int] = ()) -> set[int] | None:
    """The ids of `buf` and its aliases when `bsyms[i]`, an update of `buf`, may run in `buf`'s
    memory: none of its other arguments is a view of `buf` (in place, it would overwrite what it
    reads) and no line after it, but those at `skipped` indices, reads `buf` or an alias; else None."""
    aliases = _aliases(bsyms, buf)
    if any(id(p) in aliases for p in proxies_in(bsyms[i].args[1:])):
        return None
    later = (k for k in range(i + 1, len(bsyms)) if k not in skipped)
    if any(id(p) in aliases for k in later for p in bsyms[k].inputs):
        return None
    return aliases


@trace_pass("update_in_place")
def update_in_place(trace: Trace) -> Trace:
    """The trace with eligible partial updates of written-back inputs done in place."""
    bsyms = list(trace.bsyms)
    writeback_of = {id(b.args[0]): i for i, b in enumerate(bsyms) if b.sym is Prim.COPY_TO}
    inputs = {id(p) for p in trace.inputs}
    dropped: set[int] = set()
    returned_views = views_after_writebacks(bsyms)  # NOTE: they read the new value, done in place
    returned = returned_memory(trace)
    made_by = {id(b.output): i for i, b in enumerate(bsyms) if b.sym in IN_PLACE}
    for i, bsym in enumerate(bsyms):
        if bsym.sym not in IN_PLACE or id(bsym.output) not in writeback_of:
            continue
        c = writeback_of[id(bsym.output)]
        chain = _chain(bsyms, i, bsyms[c].args[1], made_by)
        if chain is None or id(bsyms[c].args[1]) not in inputs:
            continue
        if any(bsyms[k].output.name in returned for k in chain):
            continue
        if any(overwritable(bsyms, k, bsyms[k].args[0], {c} | returned_views) is None for k in chain):
            continue
        for k in chain:
            bsyms[k] = BoundSymbol(_SYMBOLS[bsyms[k].sym], bsyms[k].args, {}, bsyms[k].output, (bsyms[k],))
        dropped.add(c)
    return trace.with_bsyms([b for k, b in enumerate(bsyms) if k not in dropped])


def _chain(bsyms: list[BoundSymbol], i: int, root: Proxy, made_by: dict[int, int]) -> list[int] | None:
    """The indices of the updates that make `bsyms[i]`'s buffer from `root` and then `bsyms[i]`
    itself (`x[:, 0] = a; x[:, 1] = b`: the second updates the first's result), in order; None
    where a buffer on the way is neither `root` nor an update's result."""
    chain = [i]
    buf = bsyms[i].args[0]
    while buf is not root:
        k = made_by.get(id(buf))
        if k is None or k >= chain[0]:
            return None
        chain.insert(0, k)
        buf = bsyms[k].args[0]
    return chain
