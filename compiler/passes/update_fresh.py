"""update_fresh: a partial update of a temporary buffer that nothing reads afterwards is done in
that buffer's memory, not in a copy of it.

Assumes: a functionalized, flattened (possibly fused) trace.
Guarantees: each `t = slice_update(buf, ...)` (or `index_add`, `index_copy`, `scatter`,
`scatter_reduce`) whose `buf` is a temporary of this trace (the result of arithmetic, a
reduction, a matmul or `full`, inside a region or not, or of another such update) and is
neither read after `t` (nor any view of it, nor a region output fed by it) nor returned,
becomes its in-place form (`slice_update_fresh`, ...), which writes into `buf` and returns it.
Updates whose other arguments are views of `buf` keep the copy. Anything else is left as it was.

The torch executor's functional updates copy `buf` whole and write into the copy. The autodiff
writes gradients into zeros: a slice's (the halves of a rotary embedding's `chunk`, chained into
one buffer), an `index_select`'s or embedding's (`index_add` into zeros of the table's size), a
scatter's. A program's own in-place write into a tensor it computed (`y = x * 2; y[:, 0] = 0`)
is functionalized into such an update too. Without this pass each of those copies the whole
buffer first; eager PyTorch does none of these copies.
"""

from __future__ import annotations

from typing import Any

import torch

from compiler.core.ir import BoundSymbol, Proxy, Symbol, TensorProxy, Trace, proxies_in
from compiler.passes import trace_pass
from compiler.passes.update_in_place import IN_PLACE, overwritable
from compiler.prims import ELEMENTWISE, REDUCTIONS, Prim


def _own_memory(buf: torch.Tensor) -> torch.Tensor:
    """`buf`, copied first if it came back with dims that share memory (an expanded tensor), where
    writing in place would write one element many times."""
    if any(stride == 0 and size > 1 for stride, size in zip(buf.stride(), buf.shape)):
        return buf.clone()
    return buf


# NOTE: module-level functions named as printed, so a printed trace imports them and runs
def index_copy_fresh(buf: torch.Tensor, *args: Any) -> torch.Tensor:
    return IN_PLACE[Prim.INDEX_COPY][1](_own_memory(buf), *args)


def index_add_fresh(buf: torch.Tensor, *args: Any) -> torch.Tensor:
    return IN_PLACE[Prim.INDEX_ADD][1](_own_memory(buf), *args)


def slice_update_fresh(buf: torch.Tensor, *args: Any) -> torch.Tensor:
    return IN_PLACE[Prim.SLICE_UPDATE][1](_own_memory(buf), *args)


def scatter_fresh(buf: torch.Tensor, *args: Any) -> torch.Tensor:
    return IN_PLACE[Prim.SCATTER][1](_own_memory(buf), *args)


def scatter_reduce_fresh(buf: torch.Tensor, *args: Any) -> torch.Tensor:
    return IN_PLACE[Prim.SCATTER_REDUCE][1](_own_memory(buf), *args)


# prim -> the in-place form, which writes into `buf` (its own memory) and returns it
FRESH: dict[Prim, Symbol] = {
    Prim.INDEX_COPY: Symbol("index_copy_fresh", index_copy_fresh),
    Prim.INDEX_ADD: Symbol("index_add_fresh", index_add_fresh),
    Prim.SLICE_UPDATE: Symbol("slice_update_fresh", slice_update_fresh),
    Prim.SCATTER: Symbol("scatter_fresh", scatter_fresh),
    Prim.SCATTER_REDUCE: Symbol("scatter_reduce_fresh", scatter_reduce_fresh),
}
_FRESH_SYMBOLS = frozenset(FRESH.values())


# Prims whose result is always new memory, run by torch or returned by a region: arithmetic
# (a dtype conversion only where the dtype changes: else it returns its operand), reductions,
# matrix products and `full`.
_NEW_MEMORY = (ELEMENTWISE - {Prim.CONVERT_ELEMENT_TYPE}) | REDUCTIONS | {Prim.MATMUL, Prim.LINEAR, Prim.FULL}


def _new_memory(bsym: BoundSymbol) -> bool:
    """Whether `bsym`'s result is always memory of its own."""
    if bsym.sym is Prim.CONVERT_ELEMENT_TYPE:
        source = bsym.args[0]
        return isinstance(source, TensorProxy) and source.dtype != bsym.output.dtype
    return bsym.sym in _NEW_MEMORY


def _made_fresh(bsym: BoundSymbol, p: Proxy) -> bool:
    """Whether `bsym` makes `p` as new memory of its own: a `_NEW_MEMORY` prim, also one whose
    result a region returns, or an update (a functional one copies; an in-place one wrote into a
    fresh buffer)."""
    if _new_memory(bsym) or bsym.sym in FRESH or bsym.sym in _FRESH_SYMBOLS:
        return True
    if isinstance(bsym.sym, Symbol) and bsym.subsymbols:
        made = next((sub for sub in bsym.subsymbols if sub.output is p), None)
        if made is None or not _new_memory(made):
            return False
        # NOTE: two returned results computed alike might come back as one tensor: neither is
        # written in place
        returned = {id(out) for out in bsym.outputs}
        return not any(
            sub is not made and id(sub.output) in returned and sub.sym is made.sym and repr(sub.args) == repr(made.args)
            for sub in bsym.subsymbols
        )
    return False


@trace_pass("update_fresh")
def update_fresh(trace: Trace) -> Trace:
    """The trace with partial updates of dead temporaries done in their own memory."""
    bsyms = list(trace.bsyms)
    producer: dict[int, BoundSymbol] = {}
    for bsym in bsyms:
        for p in bsym.outputs:
            producer[id(p)] = bsym
    returned = {id(p) for p in proxies_in(trace.output)}
    for i, bsym in enumerate(bsyms):
        if bsym.sym not in FRESH:
            continue
        buf = bsym.args[0]
        made = producer.get(id(buf))
        if made is None or not _made_fresh(made, buf):
            continue
        aliases = overwritable(bsyms, i, buf)
        if aliases is None or aliases & returned:
            continue
        bsyms[i] = BoundSymbol(FRESH[bsym.sym], bsym.args, {}, bsym.output, (bsym,))
        producer[id(bsym.output)] = bsyms[i]
    return trace.with_bsyms(bsyms)
