"""`torch.as_strided` / `Tensor.as_strided` read over a contiguous tensor, and the flat positions
of a strided grid that it (and `F.fold`, fold.py) gathers or scatters by.

Eager's `as_strided(size, stride, offset)` reads the element at `offset + sum(i_k * stride_k)` of
the tensor's storage for each index `i` of `size`. Over a tensor eager lays out contiguously
(its strides, read from the layout model, are guarded by the prologue), element `f` of its
storage from its own start is element `f` of the flattened tensor, so the result is an
`index_select` of those positions: its gradient (an `index_add`) sums where positions repeat, as
eager's does. Refused: a tensor of another layout, positions past the tensor's last element
(eager would read memory the tensor does not own), an explicit `storage_offset` on a tensor whose
own offset the trace does not know (an input or a view), and symbolic sizes. The result is new
memory where eager's is a view, so a write into it is refused (`aliasing.forbid_writes`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from compiler import prims
from compiler.core import ir
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy, size_product
from compiler.ops import aliasing
from compiler.ops.layout_queries import is_contiguous
from compiler.ops.registry import register


def strided_positions(sizes: Sequence[int], strides: Sequence[int], offset: int, device: torch.device) -> TensorProxy:
    """The int64 flat positions `offset + sum(i_k * strides[k])` of every index `i` of a grid of
    `sizes`, in row-major order of the grid (a 1-D tensor of `prod(sizes)` entries)."""
    sizes = list(sizes)
    total = prims.full(sizes, offset, torch.int64, device)
    for k, (size, stride) in enumerate(zip(sizes, strides)):
        if stride == 0 or size == 1:
            continue
        along = prims.iota(size, 0, stride, torch.int64, device)
        total = prims.add(total, prims.broadcast_in_dim(along, sizes, [k]))
    return prims.reshape(total, [size_product(sizes)])


def _ints(name: str, what: str, value: Any) -> list[int]:
    values = list(value) if isinstance(value, (tuple, list, torch.Size)) else None
    check(
        values is not None and all(isinstance(v, int) and not isinstance(v, bool) for v in values),
        lambda: (
            f"{name}: {what} must be a sequence of ints (symbolic sizes are not supported), got {value!r}" + called_at()
        ),
        NotImplementedError,
    )
    return values  # type: ignore[return-value]


@register("torch.as_strided", "torch.Tensor.as_strided")
def as_strided(input: TensorProxy, size: Any, stride: Any, storage_offset: Any = None) -> TensorProxy:
    """The elements of contiguous `input` at `storage_offset + sum(i_k * stride_k)` for each index of
    `size`, as eager's `as_strided` reads them (see the module for what is refused)."""
    name = "torch.as_strided"
    check(isinstance(input, TensorProxy), lambda: f"{name}: expected a tensor, got {input!r}{called_at()}", TypeError)
    sizes, strides = _ints(name, "size", size), _ints(name, "stride", stride)
    check(
        len(sizes) == len(strides) and all(s >= 0 for s in sizes) and all(s >= 0 for s in strides),
        lambda: f"{name}: size {sizes} and stride {strides} need one non-negative entry per dim{called_at()}",
        RuntimeError,
    )
    check(
        all(type(s) is int for s in input.shape),
        lambda: f"{name}: {input.name} has symbolic sizes {tuple(input.shape)}; not supported{called_at()}",
        NotImplementedError,
    )
    check(
        is_contiguous(input),
        lambda: (
            f"{name}: only a contiguous tensor is supported, and {input.name} is not; call .contiguous() on it "
            f"first (its storage order is not its element order){called_at()}"
        ),
        NotImplementedError,
    )
    context = ir.current()
    fresh = context is not None and aliasing.view_link(context, input) is None and id(input) in context.producers
    check(
        storage_offset is None or (fresh and isinstance(storage_offset, int) and storage_offset >= 0),
        lambda: (
            f"{name}: storage_offset={storage_offset!r} counts from the start of {input.name}'s storage, which the "
            f"trace knows only for a tensor the program made (not an argument nor a view); pass None{called_at()}"
        ),
        NotImplementedError,
    )
    numel, offset = size_product(input.shape), storage_offset or 0
    last = offset + sum((n - 1) * s for n, s in zip(sizes, strides)) if all(sizes) else -1
    check(
        last < numel,
        lambda: (
            f"{name}: size {sizes} and stride {strides} reach element {last} of {input.name}, which has {numel} "
            f"elements{called_at()}"
        ),
        NotImplementedError,
    )
    flat = prims.reshape(input, [numel])
    positions = strided_positions(sizes, strides, offset, input.device)
    result = prims.reshape(prims.index_select(flat, 0, positions), sizes)
    aliasing.forbid_writes(result, "as_strided (a copy here, a view in eager)")
    return result
