"""F.pad in its four modes, as slices, broadcasts and concatenation (no padding prim): per padded
dim, the last first as torch orders the pad widths, the blocks before and after are made from the
input (constant: filled; replicate: the edge repeated; reflect: the elements next to the edge in
mirror order; circular: the other end); negative widths crop, before padding (constant,
circular) or after it (reflect, replicate), as eager does."""

from __future__ import annotations

from typing import Any

from compiler import prims
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy
from compiler.ops.aliasing import fresh_copy
from compiler.ops.factory import _full
from compiler.ops.registry import register

MODES = ("constant", "reflect", "replicate", "circular")


def _range(t: TensorProxy, dim: int, start: Any, stop: Any) -> TensorProxy:
    starts = [start if d == dim else 0 for d in range(t.ndim)]
    ends = [stop if d == dim else s for d, s in enumerate(t.shape)]
    return prims.slice(t, starts, ends, [1] * t.ndim)


def _block(t: TensorProxy, dim: int, width: int, before: bool, mode: str, fill: Any) -> TensorProxy:
    """The `width` elements padded before (or after) `t` along `dim`."""
    size = t.shape[dim]
    shape = [width if d == dim else s for d, s in enumerate(t.shape)]
    if mode == "constant":
        return _full("F.pad", shape, fill, t.dtype, t.device)
    if mode == "replicate":
        edge = _range(t, dim, 0, 1) if before else _range(t, dim, size - 1, size)
        return prims.broadcast_in_dim(edge, shape, list(range(t.ndim)))
    if mode == "circular":
        return _range(t, dim, size - width, size) if before else _range(t, dim, 0, width)
    # NOTE: reflect mirrors around the edge element, which is not repeated: one slice per element.
    indices = range(width, 0, -1) if before else range(size - 2, size - 2 - width, -1)
    pieces = [_range(t, dim, i, i + 1) for i in indices]
    return prims.cat(pieces, dim) if len(pieces) > 1 else pieces[0]


def _crop(t: TensorProxy, dim: int, before: int, after: int) -> TensorProxy:
    """`t` without -before leading and -after trailing elements along `dim` (negative widths)."""
    start, stop = max(-before, 0), t.shape[dim] - max(-after, 0)
    return _range(t, dim, start, stop) if start or stop != t.shape[dim] else t


@register("torch.nn.functional.pad", "torch._C._nn.pad")
def pad(input: TensorProxy, pad: Any, mode: str = "constant", value: Any = None) -> Any:
    """`input` with pad[2i] elements before and pad[2i + 1] after its i-th dim from the end."""
    check(mode in MODES, lambda: f"F.pad: mode={mode!r} is not one of {MODES}{called_at()}", NotImplementedError)
    check(
        len(pad) % 2 == 0 and len(pad) // 2 <= input.ndim,
        lambda: f"F.pad: pad must hold two widths per padded dim (at most {input.ndim} dims), got {pad!r}{called_at()}",
        ValueError,
    )
    fill = 0 if value is None else value
    out, copied = input, False
    for i in range(len(pad) // 2):
        dim = input.ndim - 1 - i
        before, after = pad[2 * i], pad[2 * i + 1]  # NOTE: symbolic widths stay symbolic but in reflect mode
        if mode == "reflect":  # one slice per element: the widths are read as ints (guarded)
            before, after = int(before), int(after)
        crop_first = mode in ("constant", "circular")  # NOTE: eager's order, per mode
        out = _crop(out, dim, before, after) if crop_first else out
        parts = [
            *([_block(out, dim, before, True, mode, fill)] if before > 0 else []),
            out,
            *([_block(out, dim, after, False, mode, fill)] if after > 0 else []),
        ]
        out = prims.cat(parts, dim) if len(parts) > 1 else out
        copied = copied or len(parts) > 1
        out = out if crop_first else _crop(out, dim, before, after)
    # NOTE: eager's result is new memory even where it only crops (negative widths) or pads nothing
    return out if copied else fresh_copy(out)
