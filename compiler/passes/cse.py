"""cse: common-subexpression elimination over prims.

Assumes: a flattened trace. Guarantees: no two pure prims with equal arguments remain; the later
one's outputs are replaced by the earlier one's everywhere after it (output included). A guard
repeated with equal arguments is dropped (checking twice adds nothing). Other side-effecting
prims, random prims (each call draws anew) and `empty` (whose buffers must stay distinct) are
never merged, nor are the prims that compute a value written back by `copy_to` (each write-back
owns its value: nothing else may read it, see check_writebacks); a prim reading a buffer after its
write-back is not the same value as one reading it before. Two prims whose outputs' memory the
trace returns both (passes/returned.py) stay apart: eager returns them in memory of their own
(and a value that a returned one merged into is returned from then on: `y = sin(x)` read only
inside the trace, then `sin(x)` returned twice, gives two returned values, not one).
"""

from __future__ import annotations

from typing import Any

from compiler.core.ir import BoundSymbol, NumberProxy, Proxy, TensorProxy, Trace, map_proxies
from compiler.passes import trace_pass
from compiler.passes.returned import returned_memory
from compiler.prims import GUARDS, RANDOM, SIDE_EFFECTS, Prim

_NEVER_MERGED = (SIDE_EFFECTS - GUARDS) | RANDOM | {Prim.EMPTY}


def _key(value: Any) -> Any:
    if isinstance(value, Proxy):
        return ("proxy", value.name)
    if isinstance(value, (tuple, list)):
        # NOTE: a shape (ints only) is its own key: no int equals an item's (type, value) pair.
        if all(type(v) is int for v in value):
            return (type(value).__name__, tuple(value))
        return (type(value).__name__, tuple([_key(v) for v in value]))
    if isinstance(value, dict):
        return ("dict", tuple((k, _key(v)) for k, v in value.items()))
    if isinstance(value, slice):
        return ("slice", _key((value.start, value.stop, value.step)))
    return (type(value).__name__, value)


@trace_pass("cse")
def cse(trace: Trace) -> Trace:
    """The trace with repeated pure computations computed once."""
    replacement: dict[int, Proxy] = {}
    seen: dict[Any, BoundSymbol] = {}
    kept: list[BoundSymbol] = []

    written_back = {id(b.args[0]) for b in trace.bsyms if b.sym is Prim.COPY_TO}
    returned = returned_memory(trace)
    writebacks_seen: dict[str, int] = {}  # buffer name → write-backs into it so far

    def substitute(value: Any) -> Any:
        return map_proxies(value, lambda p: replacement.get(id(p), p))

    for bsym in trace.bsyms:
        if replacement and any(id(p) in replacement for p in bsym.inputs):
            bsym = bsym.replace(args=substitute(bsym.args), kwargs=substitute(bsym.kwargs))
        owned = any(id(p) in written_back for p in bsym.outputs)
        if isinstance(bsym.sym, Prim) and bsym.sym not in _NEVER_MERGED and not owned:
            # NOTE: a view of a buffer after its write-back sees other contents than before it.
            # (input position, write-backs into it so far) where there were any
            versions = (
                tuple((i, n) for i, p in enumerate(bsym.inputs) if (n := writebacks_seen.get(p.name)))
                if writebacks_seen
                else ()
            )
            key = (bsym.sym, _key(bsym.args), _key(bsym.kwargs), versions)
            earlier = seen.get(key)
            if earlier is not None and not _both_returned(bsym, earlier, returned):
                if any(p.name in returned for p in bsym.outputs):  # NOTE: another returned copy must not merge too
                    returned.update(p.name for p in earlier.outputs)
                for old, new in zip(bsym.outputs, earlier.outputs):
                    # NOTE: the earlier prim's output may have been remade with replaced sizes
                    # (`_with_sizes_replaced`): its readers take the remade proxy, the one kept
                    replacement[id(old)] = replacement.get(id(new), new)
                continue
            seen[key] = bsym
        if replacement:
            bsym = _with_sizes_replaced(bsym, replacement)
        if bsym.sym is Prim.COPY_TO:
            writebacks_seen[bsym.args[1].name] = writebacks_seen.get(bsym.args[1].name, 0) + 1
        kept.append(bsym)
    return trace.with_bsyms(kept, output=substitute(trace.output))


def _both_returned(bsym: BoundSymbol, earlier: BoundSymbol, returned: set[str]) -> bool:
    """Whether the caller gets the memory of both `bsym`'s and `earlier`'s outputs (`returned`:
    passes/returned.py): merged, two tensors eager returns apart would be one."""
    mine = any(p.name in returned for p in bsym.outputs)
    return mine and any(p.name in returned for p in earlier.outputs)


def _with_sizes_replaced(bsym: BoundSymbol, replacement: dict[int, Proxy]) -> BoundSymbol:
    """`bsym` whose output tensors have their replaced sizes substituted (each such tensor is
    replaced by its new proxy for the lines after it too)."""
    resized: dict[int, Proxy] = {}
    for p in bsym.outputs:
        if isinstance(p, TensorProxy) and any(isinstance(s, NumberProxy) and id(s) in replacement for s in p.shape):
            shape = tuple(replacement.get(id(s), s) if isinstance(s, NumberProxy) else s for s in p.shape)
            resized[id(p)] = replacement[id(p)] = TensorProxy(shape, p.dtype, p.device, name=p.name)
    if not resized:
        return bsym
    return bsym.replace(output=map_proxies(bsym.output, lambda p: resized.get(id(p), p)))
