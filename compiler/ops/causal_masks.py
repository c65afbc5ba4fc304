"""Attention masks that are exactly causal, recognised from the prims that made them.

`F.scaled_dot_product_attention(q, k, v, attn_mask=m)` where `m[..., i, j]` is `j <= i` over a square
of queries and keys is `is_causal=True` without the mask. Models build that mask themselves and
eager passes it (transformers' Falcon: `kv_index <= cache_position`, from two `arange`s): torch then
cannot take FlashAttention, and the kernels that read a mask cost more device and host time. With
`is_causal=True` the executors pick as they do for any causal attention.

Decided from how the trace made the mask, never from its values: a comparison of two integer
index tensors, each an `iota` of step 1 (plus a constant, converted, broadcast or reshaped with unit
dims) along one of the mask's last two dims, broadcast over the leading dims afterwards and
and-ed with nothing but True (BioGPT ands in a padding mask of ones). Anything else (a padding
mask read from an input, a sliding window, a decode step's rectangle) keeps its mask.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch

from compiler.core import dtypes
from compiler.core.context import current
from compiler.core.ir import TensorProxy
from compiler.core.proxies import same_extent
from compiler.ops import aliasing
from compiler.ops.known_values import write_targets
from compiler.prims import Prim


class _Index(NamedTuple):
    """An integer tensor whose value is its index along one dim (counted from the end) plus `offset`."""

    dim: int
    offset: int


def is_causal_mask(mask: TensorProxy, query: TensorProxy, key: TensorProxy) -> bool:
    """Whether the bool `mask` is, by construction, `key position <= query position` over a square
    of as many queries as keys (see the module)."""
    context = current()
    if context is None or mask.ndim < 2 or query.ndim < 2 or key.ndim < 2:
        return False
    rows, cols = query.shape[-2], key.shape[-2]
    if not (same_extent(rows, cols) and same_extent(mask.shape[-2], rows) and same_extent(mask.shape[-1], cols)):
        return False
    walk = _Walk(context.producers)
    return _lower_triangle(walk, mask) and not _written(context, walk.seen)


class _Walk:
    """The prims that made the tensors a match reads, and every tensor it read (`seen`)."""

    def __init__(self, producers: dict[int, Any]) -> None:
        self.producers = producers
        self.seen: list[TensorProxy] = []

    def producer(self, t: Any) -> Any:
        """The prim that made the tensor `t` (None for an input or a non-tensor)."""
        if not isinstance(t, TensorProxy):
            return None
        self.seen.append(t)
        return self.producers.get(id(t))


def _written(context: Any, seen: list[TensorProxy]) -> bool:
    """Whether the program wrote in place into any of `seen` or what they view: the prims that made
    a tensor no longer tell its value then (`arange(n)[0] = 5`)."""
    written = {id(aliasing.root(context, t)) for t in write_targets(context.bsyms)}
    return any(id(aliasing.root(context, t)) in written for t in seen)


def _lower_triangle(walk: _Walk, mask: TensorProxy) -> bool:
    """`mask` as a comparison `j <= i` of its last two dims, broadcast over any leading dims."""
    bsym = walk.producer(mask)
    while bsym is not None and bsym.sym in (Prim.BROADCAST_IN_DIM, Prim.BITWISE_AND):
        if bsym.sym is Prim.BITWISE_AND:  # and-ed with all True (BioGPT: a padding mask of ones)
            a, b = bsym.args
            if _all_true(walk, a):
                bsym = walk.producer(b)
            elif _all_true(walk, b):
                bsym = walk.producer(a)
            else:
                return False
            continue
        operand, shape, dims = bsym.args
        rank = len(shape)
        if operand.ndim < 2 or list(dims[-2:]) != [rank - 2, rank - 1]:
            return False
        if not all(same_extent(operand.shape[k], shape[d]) for k, d in zip((-2, -1), (-2, -1))):
            return False
        bsym = walk.producer(operand)
    if bsym is None or bsym.sym not in (Prim.LE, Prim.GE, Prim.LT, Prim.GT):
        return False
    a, b = (_index(walk, x) for x in bsym.args)
    if a is None or b is None:
        return False
    if bsym.sym in (Prim.GE, Prim.GT):  # b <= a, b < a
        a, b = b, a
    # a <= b (or a < b, that is a <= b - 1): the key's index on the left, the query's on the right
    slack = b.offset - a.offset - (1 if bsym.sym in (Prim.LT, Prim.GT) else 0)
    return a.dim == -1 and b.dim == -2 and slack == 0


# Prims whose every element is one of their first operand's.
_PICKS = frozenset({Prim.BROADCAST_IN_DIM, Prim.RESHAPE, Prim.PERMUTE, Prim.SQUEEZE, Prim.SLICE})
_PICKS |= {Prim.INDEX_SELECT, Prim.TAKE_ALONG_DIM}


def _all_true(walk: _Walk, t: Any) -> bool:
    """Whether `t` is `True`, or a bool tensor made all True: picked (broadcast, viewed, gathered)
    from a `full` of True, or of a nonzero number converted to bool (`torch.ones(...).bool()`)."""
    if t is True:
        return True
    bsym = walk.producer(t)
    while bsym is not None and bsym.sym in _PICKS:
        bsym = walk.producer(bsym.args[0])
    if bsym is not None and bsym.sym is Prim.CONVERT_ELEMENT_TYPE and bsym.args[1] is torch.bool:
        bsym = walk.producer(bsym.args[0])
        return bsym is not None and bsym.sym is Prim.FULL and type(bsym.args[1]) in (int, float) and bsym.args[1] != 0
    return bsym is not None and bsym.sym is Prim.FULL and bsym.args[1] is True


def _index(walk: _Walk, t: Any) -> _Index | None:
    """`t` as an `_Index` (see there), or None where its prims do not show it to be one."""
    if not isinstance(t, TensorProxy) or not dtypes.is_integer(t.dtype):
        return None
    bsym = walk.producer(t)
    if bsym is None:
        return None
    if bsym.sym is Prim.IOTA:
        _, start, step, _, _ = bsym.args
        return _Index(-1, start) if type(start) is int and type(step) is int and step == 1 else None
    if bsym.sym is Prim.CONVERT_ELEMENT_TYPE:
        return _index(walk, bsym.args[0])
    if bsym.sym in (Prim.ADD, Prim.SUB):
        x, c = bsym.args
        if bsym.sym is Prim.ADD and type(x) is int:
            x, c = c, x
        found = _index(walk, x) if type(c) is int else None
        return None if found is None else _Index(found.dim, found.offset + (c if bsym.sym is Prim.ADD else -c))
    if bsym.sym is Prim.BROADCAST_IN_DIM:
        operand, shape, dims = bsym.args
        found = _index(walk, operand)
        if found is None:
            return None
        dim = dims[operand.ndim + found.dim]
        return _Index(dim - len(shape), found.offset) if same_extent(operand.shape[found.dim], shape[dim]) else None
    if bsym.sym is Prim.RESHAPE:  # unit dims added or removed around the one that varies
        operand, shape = bsym.args
        found = _index(walk, operand)
        kept = [d for d, size in enumerate(shape) if not same_extent(size, 1)]
        if found is None or len(kept) != 1 or not same_extent(shape[kept[0]], operand.shape[found.dim]):
            return None
        others = [size for d, size in enumerate(operand.shape) if d != operand.ndim + found.dim]
        return _Index(kept[0] - len(shape), found.offset) if all(same_extent(s, 1) for s in others) else None
    return None
