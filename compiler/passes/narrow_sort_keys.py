"""narrow_sort_keys: an argsort of integers whose values are known to be small sorts them in a
narrower integer dtype.

A mixture of experts routes its tokens by sorting their expert numbers: `torch.topk(...).indices`
(int64) flattened, then `argsort`. torch sorts int64 keys in more radix passes, each its own
kernels, than int32, int16 or uint8 keys: on a GPU, host time and device time grow with the key's
width. The values of an index an ordering returns lie in `[0, size)` of the dim it ordered, so
those keys fit the narrowest dtype that holds `size - 1`.

Ranges are known for the indices of `topk` and `argsort` and for `iota` (integer start and step),
and carried through views, slices, gathers, concatenation and conversions that hold them. Where
an argsort reads such a value in a wider integer dtype, it reads a conversion to the narrow one
instead (which the fusion pass may fuse with what produced the value).

Assumes: a pure, flattened trace with static sizes at the ordered dims (a symbolic size leaves
the sort as it is). Guarantees: the same indices, bit for bit. The conversion keeps every value
and their order, and a stable sort's indices are then the same. A sort that need not be stable
is narrowed only on CUDA: torch picks its CUDA algorithm (a stable radix sort, or a comparison
network for short rows) by length, not dtype, so ties come out in the same order; its CPU sort may
pick by dtype (a radix sort for wide keys), so ties could come out in another order there.
"""

from __future__ import annotations

from typing import Any

import torch

from compiler.core.context import TraceContext
from compiler.core.ir import BoundSymbol, Proxy, TensorProxy, Trace
from compiler.passes import trace_pass
from compiler.prims import GATHERS, VIEWS, Prim

Range = tuple[int, int]  # (lowest, highest) value, both included

_NARROW = (torch.uint8, torch.int16, torch.int32)  # the dtypes keys are narrowed to, narrowest first
_INTEGERS = {torch.uint8: 0, torch.int8: 1, torch.int16: 2, torch.int32: 3, torch.int64: 4}  # by width


def _index_range(a: Any, dim: Any) -> Range | None:
    """The values of the indices an ordering of `a` along `dim` returns: [0, size - 1]."""
    if not isinstance(a, TensorProxy) or type(dim) is not int or not a.shape:
        return None
    size = a.shape[dim]
    return (0, max(size - 1, 0)) if type(size) is int else None


def _iota_range(length: Any, start: Any, step: Any, dtype: Any) -> Range | None:
    if dtype not in _INTEGERS or not all(type(v) is int for v in (length, start, step)) or length <= 0:
        return None
    last = start + step * (length - 1)
    return (min(start, last), max(start, last))


def _fits(values: Range, dtype: torch.dtype) -> bool:
    held = torch.iinfo(dtype)
    return held.min <= values[0] and values[1] <= held.max


def value_ranges(trace: Trace) -> dict[str, Range]:
    """Proxy name -> the range of its values, for the integer tensors whose range is known."""
    ranges: dict[str, Range] = {}
    for bsym in trace.bsyms:
        out, args = bsym.output, bsym.args
        if not isinstance(out, TensorProxy) or out.dtype not in _INTEGERS:
            continue
        found: Range | None = None
        if bsym.sym is Prim.TOPK:
            found = _index_range(args[0], args[2])
        elif bsym.sym is Prim.ARGSORT:
            found = _index_range(args[0], args[1])
        elif bsym.sym is Prim.IOTA:
            found = _iota_range(*args[:3], args[3])
        elif bsym.sym in VIEWS or bsym.sym in GATHERS or bsym.sym is Prim.CONVERT_ELEMENT_TYPE:
            source = args[0]
            found = ranges.get(source.name) if isinstance(source, Proxy) else None
        elif bsym.sym is Prim.CAT:
            parts = [ranges.get(p.name) for p in args[0]] if all(isinstance(p, Proxy) for p in args[0]) else [None]
            if parts and None not in parts:
                found = (min(p[0] for p in parts), max(p[1] for p in parts))  # type: ignore[index]
        if found is not None and _fits(found, out.dtype):
            ranges[out.name] = found
    return ranges


def _narrow_dtype(key: TensorProxy, values: Range) -> torch.dtype | None:
    """The narrowest integer dtype that holds `values`, where it is narrower than `key`'s."""
    for dtype in _NARROW:
        if _fits(values, dtype):
            return dtype if _INTEGERS[dtype] < _INTEGERS[key.dtype] else None
    return None


def narrow_sort_keys(trace: Trace) -> Trace:
    """The trace with each argsort of small known integers reading them in the narrowest dtype; the
    trace itself where no argsort is narrowed (most traces sort nothing: no pass shows in their list)."""
    if not any(b.sym is Prim.ARGSORT for b in trace.bsyms):
        return trace
    ranges = value_ranges(trace)
    narrowed = {}
    for bsym in trace.bsyms:
        if bsym.sym is Prim.ARGSORT:
            key, stable = bsym.args[0], bsym.args[3]
            values = ranges.get(key.name) if isinstance(key, TensorProxy) else None
            narrow = _narrow_dtype(key, values) if values is not None and key.dtype in _INTEGERS else None
            if narrow is not None and (stable or key.device.type == "cuda"):
                narrowed[id(bsym)] = narrow
    return _narrowed(trace, narrowed) if narrowed else trace


@trace_pass("narrow_sort_keys")
def _narrowed(trace: Trace, narrowed: dict[int, torch.dtype]) -> Trace:
    """`trace` with each argsort in `narrowed` (by id) reading its key converted to that dtype."""
    context = TraceContext(reserved=trace.names())
    bsyms: list[BoundSymbol] = []
    for bsym in trace.bsyms:
        narrow = narrowed.get(id(bsym))
        if narrow is not None:
            key = bsym.args[0]
            keys = TensorProxy(key.shape, narrow, key.device, name=context.fresh(f"{key.name}_keys"))
            bsyms.append(BoundSymbol(Prim.CONVERT_ELEMENT_TYPE, (key, narrow), {}, keys))
            bsym = bsym.replace(args=(keys, *bsym.args[1:]))
        bsyms.append(bsym)
    return trace.with_bsyms(bsyms)
