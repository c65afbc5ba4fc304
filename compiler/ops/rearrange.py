"""Rearrangements: movedim, flip, roll, tile, diff.

movedim is a permutation: the moved dims at their destinations, the others in their order.

flip gathers each flipped dim with a reversed iota (`index_select`); roll is two slices joined
(`cat`); tile is `Tensor.repeat` with its repeats padded to the rank; diff subtracts neighbours
(bool: they differ) n times, after joining `prepend` and `append`. A roll's sizes and a diff's
count are taken as numbers (a symbolic size is specialised, guarded).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from compiler import prims
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy
from compiler.ops.aliasing import fresh_copy
from compiler.ops.elementwise import sub
from compiler.ops.operands import canonical_dim, elementwise
from compiler.ops.registry import register
from compiler.ops.repeat import repeat
from compiler.ops.shape import _sizes, _slice_dim, cat, flatten, permute, reshape


def _dims(op: str, dims: Any, ndim: int) -> list[int]:
    items = list(dims) if isinstance(dims, (tuple, list, torch.Size)) else [dims]
    out = [canonical_dim(d, ndim) for d in items]
    check(
        len(set(out)) == len(out),
        lambda: f"{op}: dims {tuple(items)} name a dim more than once{called_at()}",
        RuntimeError,
    )
    return out


@register("torch.movedim", "torch.Tensor.movedim", "torch.moveaxis", "torch.Tensor.moveaxis")
def movedim(input: TensorProxy, source: Any, destination: Any) -> Any:
    """torch.movedim: dims `source` moved to `destination`, the others keeping their order."""
    sources, destinations = _dims("movedim", source, input.ndim), _dims("movedim", destination, input.ndim)
    check(
        len(sources) == len(destinations),
        lambda: f"movedim: {len(sources)} source dims but {len(destinations)} destinations{called_at()}",
        ValueError,
    )
    rest = iter(d for d in range(input.ndim) if d not in sources)
    placed = dict(zip(destinations, sources))
    return permute(input, [placed[d] if d in placed else next(rest) for d in range(input.ndim)])


@register("torch.flip", "torch.Tensor.flip")
def flip(input: TensorProxy, *args: Any, dims: Any = None) -> TensorProxy:
    """torch.flip: the elements in reverse order along each of `dims` (a new tensor)."""
    given = (dims,) if dims is not None else args
    flat = given[0] if len(given) == 1 and isinstance(given[0], (tuple, list, torch.Size)) else given
    out = input
    for d in _dims("torch.flip", flat, input.ndim):
        if input.ndim == 0:
            break
        n = input.shape[d]
        reversed_positions = prims.iota(n, n - 1, -1, torch.int64, input.device)
        out = prims.index_select(out, d, reversed_positions)
    return out if out is not input else fresh_copy(input)


@register("torch.fliplr", "torch.Tensor.fliplr")
def fliplr(input: TensorProxy) -> TensorProxy:
    """torch.fliplr: flip along dim 1 (at least 2-D)."""
    check(input.ndim >= 2, lambda: f"torch.fliplr: expected a tensor of at least 2 dims{called_at()}", ValueError)
    return flip(input, 1)


@register("torch.flipud", "torch.Tensor.flipud")
def flipud(input: TensorProxy) -> TensorProxy:
    """torch.flipud: flip along dim 0 (at least 1-D)."""
    check(input.ndim >= 1, lambda: f"torch.flipud: expected a tensor of at least 1 dim{called_at()}", ValueError)
    return flip(input, 0)


@register("torch.roll", "torch.Tensor.roll")
def roll(input: TensorProxy, shifts: Any, dims: Any = None) -> TensorProxy:
    """torch.roll: elements shifted along dims, wrapping around (no dims: over the flattened tensor)."""
    shift_list = list(shifts) if isinstance(shifts, (tuple, list)) else [shifts]
    if dims is None or (isinstance(dims, (tuple, list)) and len(dims) == 0):
        check(
            len(shift_list) == 1,
            lambda: f"torch.roll: {len(shift_list)} shifts need as many dims{called_at()}",
            RuntimeError,
        )
        return reshape(roll(flatten(input), shift_list, 0), list(input.shape))
    dim_list = _dims("torch.roll", dims, input.ndim)
    check(
        len(shift_list) == len(dim_list),
        lambda: (
            f"torch.roll: {len(shift_list)} shifts for {len(dim_list)} dims; expected one shift per dim" + called_at()
        ),
        RuntimeError,
    )
    out = input
    for shift, d in zip(shift_list, dim_list):
        n = input.shape[d] if input.ndim else 1  # NOTE: symbolic sizes and shifts stay symbolic
        s = shift % n if n else 0
        if s:
            out = prims.cat([_slice_dim(out, d, n - s, n), _slice_dim(out, d, 0, n - s)], d)
    return out if out is not input else fresh_copy(input)


@register("torch.tile", "torch.Tensor.tile")
def tile(input: TensorProxy, *dims: Any) -> TensorProxy:
    """torch.tile: Tensor.repeat with the repeats padded with leading 1s to the input's rank."""
    reps = _sizes(dims)
    return repeat(input, *([1] * (input.ndim - len(reps)) + list(reps)))


@register("torch.diff", "torch.Tensor.diff")
def diff(input: TensorProxy, n: int = 1, dim: int = -1, prepend: Any = None, append: Any = None) -> TensorProxy:
    """torch.diff: the n-th forward difference along `dim` (bool: whether neighbours differ)."""
    check(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0,
        lambda: f"torch.diff: n must be a non-negative int, got {n!r}{called_at()}",
        ValueError,
    )
    check(input.ndim >= 1, lambda: f"torch.diff: expected a tensor of at least 1 dim{called_at()}", RuntimeError)
    d = canonical_dim(dim, input.ndim)
    parts: Sequence[Any] = [p for p in (prepend, input, append) if p is not None]
    x = cat(list(parts), d) if len(parts) > 1 else input
    for _ in range(n):
        size = int(x.shape[d])
        if size == 0:
            break
        later, earlier = _slice_dim(x, d, 1, size), _slice_dim(x, d, 0, size - 1)
        x = elementwise(prims.ne, later, earlier) if x.dtype == torch.bool else sub(later, earlier)
    return x
