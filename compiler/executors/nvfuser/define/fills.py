"""A cat's fills in an nvFuser definition: the zeros a shift or a pad cats beside a piece, made
with that piece's extents (`fill_beside`) in place of the fill the trace has (`only_beside`).
Split from translations.py, whose `_cat` and `_full` call these."""

from __future__ import annotations

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
