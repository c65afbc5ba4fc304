"""A cat's fills in an nvFuser definition: the zeros a shift or a pad cats beside a piece.

Fills at either end of a cat pad the pieces between them (`pad_of_fills`): a pad keeps the piece's
extents on every other dim, where a cat must prove each piece's extents the same as the others'.
A fill between two pieces is made again with the extents of the piece beside it (`fill_beside`),
in place of the fill the trace has (`only_beside`). Split from translations.py, whose `_cat` and
`_full` call these."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from compiler.core import dtypes
from compiler.core.executor import Region
from compiler.core.ir import BoundSymbol, TensorProxy
from compiler.executors.nvfuser.define.writer import NV_DTYPES, DefinitionWriter
from compiler.prims import Prim


def only_beside(region: Region, fill: TensorProxy) -> bool:
    """Whether only cats read `fill`, each with a piece that no fill makes, and the region keeps it."""
    fills = {id(b.output) for b in region.bsyms if b.sym is Prim.FULL}
    readers = [b for b in region.bsyms if any(p is fill for p in b.inputs)]
    kept = all(p is not fill for p in region.outputs)
    return (
        kept
        and bool(readers)
        and all(b.sym is Prim.CAT and any(id(t) not in fills for t in b.args[0]) for b in readers)
    )


def fill_beside(tx: DefinitionWriter, fill: BoundSymbol, piece: str, dim: int, dtype: torch.dtype) -> str:
    """A cat's filled piece (a shift's zeros) again, with the extents of `piece`, cat beside it, but
    on the cat's dim: its own come from the first input of each size, maybe not `piece`'s, and
    nvfuser_direct 0.2.36 then cannot map the pieces (fusion.cpp:1020, a GPT-J rotary's shift)."""
    extents = [tx.extent(size) if d == dim else f"fd.ops.size({piece}, dim={d})" for d, size in enumerate(fill.args[0])]
    value = tx.operand(fill.args[1], dtypes.compute_dtype(dtype))
    expr = f"fd.ops.full(shape=[{', '.join(extents)}], fill_value={value}, dtype={NV_DTYPES[dtype]})"
    return tx.emit(f"{fill.output.name}_beside", expr)


def pad_of_fills(
    tx: DefinitionWriter, fills: Sequence[BoundSymbol | None], made: Sequence[str | None], dim: int, dtype: torch.dtype
) -> str | None:
    """The cat of `made` pieces (None where a fill) as pads of the pieces between its fills, where
    every fill is at an end (a shift's `cat([zeros, x[..., :-1]])`, a pad's cotangent) and of a
    known size along `dim`; None otherwise. nvfuser_direct 0.2.36 refused the cat of GPT-J's
    rotary shifts, a fill beside a slice of a slice ("Invalid domains to map", fusion.cpp:1020)."""
    pieces = [i for i, fill in enumerate(fills) if fill is None]
    if not pieces or len(pieces) == len(fills):
        return None
    first, last = pieces[0], pieces[-1]
    if any(fill is not None for fill in fills[first : last + 1]):
        return None
    if any(fill is not None and type(fill.args[0][dim]) is not int for fill in fills):
        return None
    inner = made[first] if first == last else f"fd.ops.cat([{', '.join(made[first : last + 1])}], dim={dim})"
    ndim = len(next(fill for fill in fills if fill is not None).args[0])
    sides = [(fill, True) for fill in reversed(fills[:first])] + [(fill, False) for fill in fills[last + 1 :]]
    for fill, before in sides:
        widths = [0] * (2 * (ndim - dim))
        widths[-2 if before else -1] = fill.args[0][dim]
        value = tx.operand(fill.args[1], dtypes.compute_dtype(dtype))
        inner = f"fd.ops.pad({inner}, {widths}, {value})"
    return inner
