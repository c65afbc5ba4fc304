"""Repeating a tensor: repeat_interleave with a number of repeats (grouped-query attention's
copies of key/value heads) and repeat (tiling), as broadcasts and reshapes."""

from __future__ import annotations

from typing import Any

from compiler import prims
from compiler.core.errors import called_at, check
from compiler.core.ir import NumberProxy, TensorProxy, size_product
from compiler.ops.operands import canonical_dim
from compiler.ops.registry import register
from compiler.ops.shape import _sizes


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
    out = prims.broadcast_in_dim(input, expanded, dims)
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
    return prims.reshape(out, [r * s for r, s in zip(reps, shape)])
