"""interleaved_shifts: an interleave of stepped slices of one tensor, written as shifted copies of
the whole tensor picked by position.

GPT-J's rotary (and every "rotate every two" one, as CodeGen's) writes
`torch.stack((-x[..., 1::2], x[..., ::2]), -1).flatten(-2)`: its elements are those of `x`, each
pair swapped, the first of each pair negated. As prims that is a cat of unsqueezed stepped slices
along a new dim, merged back (`reshape(cat([unsqueeze(neg(slice(x, 1::2))), unsqueeze(slice(x, 0::2))],
-1))`). nvFuser slices only with step 1, so the stepped slices split the fusion around them, and
the backward's one-element slices of the new dim are each a segment of their own (the writer's
`_slice`), its stepped slices' cotangents slice updates of zeros in torch. Position `i` of the
result, `i = s * j + k` for a step `s`, holds piece `k`'s element `j`, which is `x[i + a_k - k]`
for a piece `x[..., a_k::s]`: each piece is `x` shifted by `a_k - k` (a slice of `x` and a fill
of zeros, cat: what nvFuser's resize scheduler fuses, as in a Llama rotary's `rotate_half`),
and `where` picks piece `i mod s` at `i`. The backward then holds slices of step 1 and cats only.

Assumes: a flattened, pure trace (before autodiff, so the backward is built from the rewritten
form; the pipeline runs it only there, `pipeline.differentiated_passes` says why). Guarantees:
every value is unchanged, bit for bit: each position takes the element the interleave took,
through the same unary prims (negations and conversions only: they map a zero filling a
shifted-in position to a finite value, which `where` then leaves out). Rewritten only where the
sizes are known ints, the step divides the sliced dim, and the pieces are the slices `a::s` of
one tensor at the step's every offset, each read by its unsqueeze alone.
"""

from __future__ import annotations

from typing import Any

import torch

from compiler import prims
from compiler.core.context import TraceContext, tracing
from compiler.core.ir import BoundSymbol, Proxy, TensorProxy, Trace, map_proxies
from compiler.core.proxies import proxies_in, same_extent
from compiler.passes import trace_pass
from compiler.passes.dce import dce
from compiler.passes.vjp_structural import zeros_shaped
from compiler.prims import Prim

# The prims a piece may apply to its slice: exact on every value, finite on zero.
_PIECE_OPS = frozenset({Prim.NEG, Prim.CONVERT_ELEMENT_TYPE})


class _Piece:
    """One interleaved piece: the slice `x[..., offset::step]` and the unary prims applied to it."""

    def __init__(self, source: TensorProxy, offset: int, ops: list[BoundSymbol]) -> None:
        self.source, self.offset, self.ops = source, offset, ops


def _ints(*values: Any) -> bool:
    return all(type(v) is int for v in values)


class _Matcher:
    def __init__(self, trace: Trace) -> None:
        self.producer: dict[str, BoundSymbol] = {}
        self.readers: dict[str, int] = {}
        for bsym in trace.bsyms:
            for p in bsym.outputs:
                self.producer[p.name] = bsym
            for name in {p.name for p in bsym.inputs}:
                self.readers[name] = self.readers.get(name, 0) + 1
        for p in proxies_in(trace.output):
            self.readers[p.name] = self.readers.get(p.name, 0) + 1

    def made_by(self, value: Any, prim: Prim) -> BoundSymbol | None:
        if not isinstance(value, TensorProxy):
            return None
        bsym = self.producer.get(value.name)
        return bsym if bsym is not None and bsym.sym is prim else None

    def only_read_once(self, value: TensorProxy) -> bool:
        return self.readers.get(value.name, 0) == 1

    def interleave(self, merge: BoundSymbol) -> tuple[int, int, list[_Piece]] | None:
        """(dim, step, pieces) when `merge` (a reshape) merges a cat of unsqueezed pieces into the
        dim before the cat's (an interleave of stepped slices of one tensor); else None."""
        cat = self.made_by(merge.args[0], Prim.CAT)
        if cat is None or not self.only_read_once(cat.output):
            return None
        pieces, c = cat.args
        shape, step = list(cat.output.shape), len(pieces)
        if c < 1 or step < 2 or not _ints(shape[c - 1], shape[c]) or shape[c] != step:
            return None
        d = c - 1
        merged = [*shape[:d], shape[d] * step, *shape[c + 1 :]]
        if len(merge.output.shape) != len(merged) or not all(map(same_extent, merge.output.shape, merged)):
            return None
        found = [self._piece(p, d, c, step) for p in pieces]
        if any(f is None for f in found) or len({f.source.name for f in found}) != 1:
            return None
        if sorted(f.offset for f in found) != list(range(step)):
            return None
        return d, step, found

    def _piece(self, value: TensorProxy, d: int, c: int, step: int) -> _Piece | None:
        unsqueeze = self.made_by(value, Prim.BROADCAST_IN_DIM)
        if unsqueeze is None or not self.only_read_once(value):
            return None
        inner, _, dims = unsqueeze.args
        kept = [k for k in range(value.ndim) if k != c]
        if list(dims) != kept or not all(same_extent(value.shape[k], size) for k, size in zip(kept, inner.shape)):
            return None  # NOTE: not an unsqueeze alone: it also expands a size-1 dim
        ops: list[BoundSymbol] = []
        while (made := self.producer.get(inner.name)) is not None and made.sym in _PIECE_OPS:
            ops.append(made)
            inner = made.args[0]
        cut = self.made_by(inner, Prim.SLICE)
        if cut is None:
            return None
        source, starts, ends, steps = cut.args
        n = source.shape[d] if d < source.ndim else None
        others_whole = all(
            same_extent(starts[k], 0) and same_extent(ends[k], source.shape[k]) for k in range(source.ndim) if k != d
        )
        if not (others_whole and _ints(n, starts[d], steps[d]) and steps[d] == step and n % step == 0):
            return None
        if not (0 <= starts[d] < step and same_extent(inner.shape[d], n // step)):
            return None
        return _Piece(source, starts[d], list(reversed(ops)))


def _shifted(x: TensorProxy, d: int, by: int) -> TensorProxy:
    """`x` moved by `by` along `d` (position i holds x[i + by]), zeros shifted in."""
    if by == 0:
        return x
    n = x.shape[d]
    starts, ends = [0] * x.ndim, list(x.shape)
    fill = zeros_shaped(x, d, abs(by))
    starts[d], ends[d] = (by, n) if by > 0 else (0, n + by)
    kept = prims.slice(x, starts, ends, [1] * x.ndim)
    return prims.cat([kept, fill] if by > 0 else [fill, kept], d)


def _picked(d: int, step: int, pieces: list[_Piece], like: TensorProxy) -> TensorProxy:
    n = like.shape[d]
    position = prims.remainder(prims.iota(n, 0, 1, torch.int64, like.device), step)
    result = None
    for k, piece in sorted(enumerate(pieces), key=lambda kp: -kp[0]):
        value = _shifted(piece.source, d, piece.offset - k)
        for op in piece.ops:
            value = prims.neg(value) if op.sym is Prim.NEG else prims.convert_element_type(value, op.args[1])
        if result is None:
            result = value
            continue
        mask = prims.broadcast_in_dim(prims.eq(position, k), list(like.shape), [d])
        result = prims.where(mask, value, result)
    assert result is not None
    return result


@trace_pass("interleaved_shifts")
def interleaved_shifts(trace: Trace) -> Trace:
    """The trace with each interleave of stepped slices of one tensor written as shifted copies of
    it picked by position (see the module); the trace itself where there is none."""
    matcher = _Matcher(trace)
    context: TraceContext | None = None
    replacement: dict[str, Proxy] = {}
    bsyms: list[BoundSymbol] = []
    for bsym in trace.bsyms:
        if replacement and any(p.name in replacement for p in bsym.inputs):
            bsym = bsym.replace(args=map_proxies(bsym.args, lambda p: replacement.get(p.name, p)))
        found = matcher.interleave(bsym) if bsym.sym is Prim.RESHAPE else None
        if found is None:
            bsyms.append(bsym)
            continue
        context = context or TraceContext(reserved=trace.names())
        with tracing(context):
            start = len(context.bsyms)
            value = _picked(*found, bsym.output)
        bsyms.extend(context.bsyms[start:])
        replacement[bsym.output.name] = value
    if not replacement:
        return trace
    output = map_proxies(trace.output, lambda p: replacement.get(p.name, p))
    return dce(trace.with_bsyms(bsyms, output=output))
