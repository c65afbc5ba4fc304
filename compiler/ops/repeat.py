"""Repeating a tensor: repeat_interleave with a number of repeats (grouped-query attention's
copies of key/value heads), repeat (tiling) and meshgrid (a grid of coordinates: relative position
tables), as broadcasts and reshapes."""

from __future__ import annotations

from typing import Any

import torch

from compiler import prims
from compiler.core.errors import called_at, check
from compiler.core.ir import NumberProxy, TensorProxy, size_product
from compiler.ops.aliasing import fresh_copy, set_memory_format
from compiler.ops.operands import canonical_dim
from compiler.ops.registry import register
from compiler.ops.shape import _sizes, expand, reshape


def _contiguous_copy(broadcast: TensorProxy) -> TensorProxy:
    """A new row-major tensor, as eager's repeats return (not a view of the input's broadcast)."""
    out = fresh_copy(broadcast)
    set_memory_format(out, broadcast, torch.contiguous_format)
    return out


@register("torch.repeat_interleave", "torch.Tensor.repeat_interleave")
def repeat_interleave(input: TensorProxy, repeats: Any, dim: int | None = None, *, output_size: Any = None) -> Any:
    """Each element (each slice along `dim`) repeated `repeats` times in place: [a, b] -> [a, a, b, b]."""
    check(
        isinstance(repeats, (int, NumberProxy)) and not isinstance(repeats, bool),
        lambda: (
            f"repeat_interleave: repeats must be an int (a tensor of repeats is not supported), got {repeats!r}"
            f"{called_at()}"
        ),
        NotImplementedError,
    )
    if dim is None:
        input = prims.reshape(input, [size_product(input.shape)])
        dim = 0
    d = canonical_dim(dim, input.ndim)
    shape = list(input.shape)
    expanded = shape[: d + 1] + [repeats] + shape[d + 1 :]
    dims = [i for i in range(len(expanded)) if i != d + 1]
    out = _contiguous_copy(prims.broadcast_in_dim(input, expanded, dims))
    return prims.reshape(out, shape[:d] + [shape[d] * repeats] + shape[d + 1 :])


@register("torch.Tensor.repeat")
def repeat(input: TensorProxy, *sizes: Any) -> Any:
    """The tensor tiled `sizes[i]` times along each dim (leading sizes add new dims)."""
    reps = _sizes(sizes)
    check(
        len(reps) >= input.ndim,
        lambda: f"repeat: {len(reps)} repeats given for a tensor of {input.ndim} dims{called_at()}",
        ValueError,
    )
    shape = [1] * (len(reps) - input.ndim) + list(input.shape)
    # tiled as [r0, s0, r1, s1, ...] then merged pairwise: copies of the whole tensor, not of elements
    expanded = [x for r, s in zip(reps, shape) for x in (r, s)]
    out = prims.broadcast_in_dim(input, expanded, list(range(len(expanded) - 2 * input.ndim + 1, len(expanded), 2)))
    return prims.reshape(_contiguous_copy(out), [r * s for r, s in zip(reps, shape)])


@register("torch.meshgrid")
def meshgrid(*tensors: Any, indexing: str | None = None) -> tuple[TensorProxy, ...]:
    """One grid per 1-d (or 0-d) tensor, each its values along its own dim broadcast over the others
    (views, as eager's); `indexing="xy"` swaps the first two dims. None is eager's default, "ij"."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    check(
        indexing in (None, "ij", "xy"),
        lambda: f"torch.meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}{called_at()}",
        ValueError,
    )
    check(
        len(tensors) > 0 and all(isinstance(t, TensorProxy) and t.ndim <= 1 for t in tensors),
        lambda: f"torch.meshgrid: expected 0-d or 1-d tensors{called_at()}",
        ValueError,
    )
    check(
        len({t.dtype for t in tensors}) == 1,
        lambda: f"torch.meshgrid: expects all tensors to have the same dtype{called_at()}",
        RuntimeError,
    )
    swap = indexing == "xy" and len(tensors) >= 2
    order = [1, 0, *range(2, len(tensors))] if swap else list(range(len(tensors)))
    sizes = [size_product(tensors[i].shape) for i in order]
    grids = []
    for position, i in enumerate(order):
        shape = [1] * len(tensors)
        shape[position] = sizes[position]
        grids.append((i, expand(reshape(tensors[i], shape), sizes)))
    return tuple(grid for _, grid in sorted(grids, key=lambda pair: pair[0]))
