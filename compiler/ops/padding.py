"""Constant padding: F.pad(mode="constant"), as slices (negative pads) and concatenation with
filled blocks (positive pads), the last dim first as torch orders the pad widths."""

from __future__ import annotations

from typing import Any

from compiler import prims
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy
from compiler.ops.factory import _full
from compiler.ops.registry import register


@register("torch.nn.functional.pad", "torch._C._nn.pad")
def pad(input: TensorProxy, pad: Any, mode: str = "constant", value: Any = None) -> Any:
    """`input` with pad[2i] elements before and pad[2i + 1] after its i-th dim from the end."""
    check(
        mode == "constant",
        lambda: f"F.pad: mode={mode!r} is not supported (constant only){called_at()}",
        NotImplementedError,
    )
    check(
        len(pad) % 2 == 0 and len(pad) // 2 <= input.ndim,
        lambda: f"F.pad: pad must hold two widths per padded dim (at most {input.ndim} dims), got {pad!r}{called_at()}",
        ValueError,
    )
    fill = 0 if value is None else value
    out = input
    for i in range(len(pad) // 2):
        dim = input.ndim - 1 - i
        before, after = int(pad[2 * i]), int(pad[2 * i + 1])
        size = out.shape[dim]
        start, stop = max(-before, 0), size - max(-after, 0)
        if start or stop != size:
            starts = [start if d == dim else 0 for d in range(out.ndim)]
            ends = [stop if d == dim else s for d, s in enumerate(out.shape)]
            out = prims.slice(out, starts, ends, [1] * out.ndim)
        pieces = []
        for width in (before, after):
            shape = [width if d == dim else s for d, s in enumerate(out.shape)]
            pieces.append(_full("F.pad", shape, fill, out.dtype, out.device) if width > 0 else None)
        parts = [p for p in (pieces[0], out, pieces[1]) if p is not None]
        out = prims.cat(parts, dim) if len(parts) > 1 else out
    return out
