"""Size-1 dims in a fusion definition: broadcast or iteration, and where the difference matters.

nvFuser gives each dim of each value an iteration type. A fusion input's size-1 dim is usually
declared broadcast (shape spec `1`); a slice or an index_select can make a size-1 dim an ordinary
(iteration) one. nvfuser_direct 0.2.36 gets these mixes wrong (`WORKAROUNDS_CHECKED_ON` in executor.py):

- An index_select whose index is a broadcast `[1]` tensor, in a fusion with another index_select
  and a reduction (GPT-2 decode: `wte[tokens] + wpe[position]`, then LayerNorm), reads garbage.
  Indices are declared with iteration dims.
- Writing back a value that still has broadcast dims (`a.copy_(a_sum)`) trips an internal assert,
  and a keepdim reduction over an expanded broadcast dim returns the unreduced shape: such
  values are materialised first by adding zeros of the full shape.
- Broadcasting a size-1 iteration dim is refused; squeezing one of symbolic extent too, and
  reshaping it fails an internal assert: a slice's size-1 dim is squeezed where the slice is made
  and broadcast back (a broadcast dim from there on: `translations._slice`), any other is summed
  away before it is broadcast.

`iteration_inputs` names the inputs to declare with iteration dims; `output_flags` tracks which
dims of each value may be broadcast (an over-approximation: it only decides where zeros are
added and where a size-1 dim is squeezed before it is broadcast, both harmless when unneeded).
"""

from __future__ import annotations

from collections.abc import Mapping

from compiler.core.executor import Region
from compiler.core.ir import BoundSymbol, TensorProxy, is_unit
from compiler.core.proxies import same_extent
from compiler.prims import ELEMENTWISE, Prim, expanded_unit_dims

Flags = tuple[bool, ...]  # per dim: True where nvFuser may hold it as a broadcast dim

_REDUCTIONS = frozenset({Prim.SUM, Prim.PROD, Prim.AMAX, Prim.AMIN})
_INDEX_VIEWS = frozenset({Prim.RESHAPE, Prim.SQUEEZE, Prim.PERMUTE, Prim.CONVERT_ELEMENT_TYPE})


def iteration_inputs(region: Region) -> frozenset[str]:
    """Names of the region's tensor inputs whose size-1 dims are declared as iteration dims: the
    indices of index_select / take_along_dim (and the tensors they are reshaped from)."""
    inputs = {p.name for p in region.inputs if isinstance(p, TensorProxy)}
    producers = {p.name: b for b in region.bsyms for p in b.outputs if isinstance(p, TensorProxy)}
    chosen: set[str] = set()
    for b in region.bsyms:
        operand = {Prim.INDEX_SELECT: 2, Prim.TAKE_ALONG_DIM: 1}.get(b.sym)
        index = b.args[operand] if operand is not None else None
        while isinstance(index, TensorProxy):  # back through reshapes of the index to the input
            chosen.add(index.name)
            producer = producers.get(index.name)
            index = producer.args[0] if producer is not None and producer.sym in _INDEX_VIEWS else None
    return frozenset(chosen & inputs)


def _by_size(p: TensorProxy) -> Flags:
    return tuple(is_unit(s) for s in p.shape)


def output_flags(bsym: BoundSymbol, flags: Mapping[str, Flags]) -> Flags:
    """The broadcast flags of `bsym`'s (first) output, from its operands' flags."""
    out = bsym.output
    sym = bsym.sym
    if sym in ELEMENTWISE:
        operands = [flags.get(a.name, _by_size(a)) for a in bsym.args if isinstance(a, TensorProxy)]
        return tuple(all(f[d] for f in operands) for d in range(len(out.shape)))
    first = bsym.args[0] if bsym.args and isinstance(bsym.args[0], TensorProxy) else None
    source = flags.get(first.name, _by_size(first)) if first is not None else ()
    if sym in _REDUCTIONS or sym is Prim.SQUEEZE:
        return tuple(f for d, f in enumerate(source) if d not in bsym.args[1])
    if sym is Prim.PERMUTE:
        return tuple(source[d] for d in bsym.args[1])
    if sym is Prim.BROADCAST_IN_DIM:
        _, shape, dims = bsym.args
        expanded = set(expanded_unit_dims(bsym))
        result = [True] * len(shape)
        for i, d in enumerate(dims):
            result[d] = source[i] or i in expanded
        return tuple(result)
    if sym is Prim.SLICE:  # a size-1 slice of a longer dim is an iteration dim; a dim kept whole stays
        return tuple(f and (is_unit(o) or same_extent(o, i)) for f, o, i in zip(source, out.shape, first.shape))
    if sym is Prim.INDEX_SELECT:
        index = bsym.args[2]
        result = list(source)
        result[bsym.args[1]] = flags.get(index.name, _by_size(index))[0] if index.shape else True
        return tuple(result)
    if sym is Prim.TAKE_ALONG_DIM:
        index = bsym.args[1]
        return flags.get(index.name, _by_size(index))
    if first is not None and len(first.shape) == len(out.shape):
        # NOTE: a dim the op leaves as it was (a slice's other dims, a flip's) stays as nvFuser holds
        # it: an expanded input's stride-0 dim is a broadcast dim of any size
        return tuple(is_unit(o) or (f and same_extent(o, i)) for f, o, i in zip(source, out.shape, first.shape))
    return _by_size(out)
