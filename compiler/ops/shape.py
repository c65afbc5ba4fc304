"""Shape ops: reshape/view, permute/transpose, expand, (un)squeeze, flatten, cat/stack,
split/chunk/narrow and basic indexing (ints, slices, None, Ellipsis).

Sizes and slice bounds may be NumberProxy values (`jit(numbers="symbolic")`): the ops compute with
them as Python numbers, so every comparison they need becomes a guard in the prologue.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import torch

from compiler import prims
from compiler.core.errors import called_at, check
from compiler.core.ir import NumberProxy, TensorProxy, same_size, size_product
from compiler.ops.aliasing import contiguous_operand, fresh_copy, reshapes_as, set_memory_format
from compiler.ops.operands import (
    Promotion,
    broadcast_shapes,
    broadcast_to,
    canonical_dim,
    canonical_new_dim,
    insert_dim,
    result_dtypes,
    to_dtype,
)
from compiler.ops.registry import register
from compiler.ops.symbolic_sizes import quotient_of_products


def _sizes(args: tuple) -> list:
    """Sizes given as varargs (`view(2, 3)`) or as one sequence (`view((2, 3))`)."""
    if len(args) == 1 and isinstance(args[0], (tuple, list, torch.Size)):
        return list(args[0])
    return list(args)


@register("torch.Tensor.view")
def view(input: TensorProxy, *shape: Any) -> Any:
    """Tensor.view: a reshape that eager always makes a view (or rejects), whatever is known of
    the layout while tracing, so a write through it is never ambiguous."""
    with reshapes_as("view"):
        return reshape(input, *shape)


@register("torch.reshape", "torch.Tensor.reshape")
def reshape(input: TensorProxy, *shape: Any) -> Any:
    sizes = _sizes(shape)
    check(
        not (len(sizes) == 1 and isinstance(sizes[0], torch.dtype)),
        lambda: f"Tensor.view(dtype) reinterprets bits and is not supported{called_at()}",
        NotImplementedError,
    )
    unknown = [i for i, s in enumerate(sizes) if isinstance(s, int) and s == -1]
    check(
        len(unknown) <= 1,
        lambda: f"reshape: only one dimension can be -1, got {tuple(sizes)}{called_at()}",
        ValueError,
    )
    if unknown:
        known = size_product(s for i, s in enumerate(sizes) if i != unknown[0])
        check(
            not same_size(known, 0),
            lambda: f"reshape: cannot infer -1 in {tuple(sizes)} for a tensor of {input.numel()} elements",
            ValueError,
        )
        sizes[unknown[0]] = quotient_of_products(input.shape, [s for i, s in enumerate(sizes) if i != unknown[0]])
    check(
        same_size(size_product(sizes), input.numel()),
        lambda: f"reshape: shape {tuple(sizes)} is invalid for input {input.name} of shape {input.shape}{called_at()}",
        ValueError,
    )
    if len(sizes) == input.ndim and all(a is b or (type(a) is int and a == b) for a, b in zip(sizes, input.shape)):
        return input
    return prims.reshape(input, sizes)


@register("torch.Tensor.view_as", "torch.Tensor.reshape_as")
def view_as(input: TensorProxy, other: TensorProxy) -> Any:
    return reshape(input, other.shape)


@register("torch.permute", "torch.Tensor.permute")
def permute(input: TensorProxy, *dims: Any) -> Any:
    perm = [canonical_dim(d, input.ndim) for d in _sizes(dims)]
    check(
        sorted(perm) == list(range(input.ndim)),
        lambda: f"permute: {tuple(_sizes(dims))} is not a permutation of {input.ndim} dims{called_at()}",
        ValueError,
    )
    if perm == list(range(input.ndim)):
        return input
    return prims.permute(input, perm)


@register(
    "torch.transpose", "torch.Tensor.transpose", "torch.swapaxes", "torch.Tensor.swapaxes", "torch.swapdims",
    "torch.Tensor.swapdims",
)  # fmt: skip
def transpose(input: TensorProxy, dim0: int, dim1: int) -> Any:
    perm = list(range(input.ndim))
    a, b = canonical_dim(dim0, input.ndim), canonical_dim(dim1, input.ndim)
    if input.ndim == 0:
        return input
    perm[a], perm[b] = perm[b], perm[a]
    return permute(input, perm)


@register("torch.t", "torch.Tensor.t")
def t(input: TensorProxy) -> Any:
    check(
        input.ndim <= 2,
        lambda: f"t() expects a tensor with <= 2 dims, got {input.ndim}{called_at()}",
        ValueError,
    )
    return transpose(input, 0, 1) if input.ndim == 2 else input


@register("torch.Tensor.expand")
def expand(input: TensorProxy, *sizes: Any) -> Any:
    shape = _sizes(sizes)
    check(
        len(shape) >= input.ndim,
        lambda: (
            f"expand: the number of sizes ({len(shape)}) must be at least the rank of {input.name} "
            f"({input.ndim}){called_at()}"
        ),
        ValueError,
    )
    offset = len(shape) - input.ndim
    shape = [
        input.shape[i - offset] if isinstance(s, int) and s == -1 and i >= offset else s for i, s in enumerate(shape)
    ]
    return broadcast_to(input, shape)


@register("torch.Tensor.expand_as")
def expand_as(input: TensorProxy, other: TensorProxy) -> Any:
    return expand(input, other.shape)


@register("torch.broadcast_to", "torch.Tensor.broadcast_to")
def broadcast_to_op(input: TensorProxy, *sizes: Any, size: Sequence | None = None) -> Any:
    return expand(input, *(sizes if size is None else (list(size),)))


@register("torch.squeeze", "torch.Tensor.squeeze")
def squeeze(input: TensorProxy, dim: Any = None) -> Any:
    if dim is None:
        dims = [i for i, s in enumerate(input.shape) if isinstance(s, int) and s == 1]
    else:
        candidates = dim if isinstance(dim, (tuple, list)) else [dim]
        dims = sorted({canonical_dim(d, input.ndim) for d in candidates} & set(range(input.ndim)))
        dims = [d for d in dims if same_size(input.shape[d], 1)]
    return prims.squeeze(input, dims) if dims else input


@register("torch.unsqueeze", "torch.Tensor.unsqueeze")
def unsqueeze(input: TensorProxy, dim: int) -> Any:
    return insert_dim(input, canonical_new_dim(dim, input.ndim))


@register("torch.flatten", "torch.Tensor.flatten")
def flatten(input: TensorProxy, start_dim: int = 0, end_dim: int = -1) -> Any:
    if input.ndim == 0:
        return reshape(input, [1])
    start, end = canonical_dim(start_dim, input.ndim), canonical_dim(end_dim, input.ndim)
    check(
        start <= end,
        lambda: f"flatten: start_dim {start_dim} comes after end_dim {end_dim}{called_at()}",
        ValueError,
    )
    if start == end:
        return input
    shape = [*input.shape[:start], size_product(input.shape[start : end + 1]), *input.shape[end + 1 :]]
    return prims.reshape(input, shape)


@register("torch.ravel", "torch.Tensor.ravel")
def ravel(input: TensorProxy) -> Any:
    """The elements in a 1-D tensor: a view where reshape makes one, else a copy, as eager's."""
    return reshape(input, -1)


@register("torch.Tensor.contiguous")
def contiguous(input: TensorProxy, memory_format: Any = None) -> Any:
    # NOTE: traces hold values, not layouts; executors choose memory layouts themselves. But
    # eager copies a non-contiguous tensor, and in-place writes can tell a copy from an alias.
    if memory_format not in (None, torch.contiguous_format, torch.preserve_format):
        out = fresh_copy(input)
        set_memory_format(out, input, memory_format)
        return out
    return contiguous_operand(input)


@register("torch.cat", "torch.concat", "torch.concatenate")
def cat(tensors: Sequence[TensorProxy], dim: int = 0, *, out: Any = None) -> Any:
    check(out is None, lambda: f"torch.cat: out= is not supported{called_at()}", NotImplementedError)
    check(len(tensors) > 0, lambda: f"torch.cat needs at least one tensor{called_at()}", ValueError)
    # NOTE: torch skips legacy empty 1-D tensors of shape (0,) in cat.
    kept = [t for t in tensors if not (t.ndim == 1 and isinstance(t.shape[0], int) and t.shape[0] == 0)] or list(
        tensors[:1]
    )
    d = canonical_dim(dim, kept[0].ndim)
    _, dtype = result_dtypes(kept, Promotion.DEFAULT)
    # NOTE: a piece known to be empty along `dim` adds nothing (a rotary's pass-through part
    # `q[..., rotary_dims:]` when the rotary covers the whole head): left out, so that no fusion
    # cats an empty tensor, which crashed nvfuser_direct 0.2.36 (a segmentation fault, H200)
    kept = [t for t in kept if not (isinstance(t.shape[d], int) and t.shape[d] == 0)] or kept[:1]
    kept = [to_dtype(t, dtype) for t in kept]
    # NOTE: a one-tensor cat is a copy in eager mode (writing into it leaves the input alone).
    return fresh_copy(kept[0]) if len(kept) == 1 else prims.cat(kept, d)


@register("torch.stack")
def stack(tensors: Sequence[TensorProxy], dim: int = 0, *, out: Any = None) -> Any:
    check(out is None, lambda: f"torch.stack: out= is not supported{called_at()}", NotImplementedError)
    check(len(tensors) > 0, lambda: f"torch.stack needs at least one tensor{called_at()}", ValueError)
    shape = broadcast_shapes(tensors[0].shape)
    for t in tensors[1:]:
        check(
            t.ndim == len(shape) and all(map(same_size, t.shape, shape)),
            lambda t=t: f"torch.stack: all tensors must have the same shape; {t.shape} != {tuple(shape)}{called_at()}",
            ValueError,
        )
    d = canonical_new_dim(dim, len(shape))
    return cat([unsqueeze(t, d) for t in tensors], d)


def _slice_dim(input: TensorProxy, dim: int, start: Any, end: Any, step: int = 1) -> TensorProxy:
    starts = [0] * input.ndim
    ends = list(input.shape)
    steps = [1] * input.ndim
    starts[dim], ends[dim], steps[dim] = start, end, step
    return prims.slice(input, starts, ends, steps)


@register("torch.split", "torch.Tensor.split")
def split(tensor: TensorProxy, split_size_or_sections: Any, dim: int = 0) -> tuple:
    d = canonical_dim(dim, tensor.ndim)
    size = tensor.shape[d]
    if isinstance(split_size_or_sections, (int, NumberProxy)):
        chunk = split_size_or_sections
        positive = bool(chunk > 0)
        check(
            positive or bool(size == 0),
            lambda: f"split: split_size must be positive, got {chunk}{called_at()}",
            ValueError,
        )
        # NOTE: the number of pieces is guarded, not the sizes it comes from (symbolic sizes and
        # split sizes stay symbolic where they give the same number of pieces)
        count = max(1, int((size + (chunk - 1)) // chunk)) if positive else 1
        sections = [chunk] * (count - 1) + [size - chunk * (count - 1)]
    else:
        sections = list(split_size_or_sections)
        check(
            same_size(sum(sections[1:], sections[0]) if sections else 0, size),
            lambda: f"split: sizes {tuple(sections)} must sum to the size of dim {d} ({size}){called_at()}",
            ValueError,
        )
    for section in sections:
        check(
            bool(section >= 0),
            lambda: (
                f"split: sizes must be non-negative, got {tuple(sections)} "
                f"(values {tuple(getattr(s, 'value', s) for s in sections)}){called_at()}"
            ),
            ValueError,
        )
    pieces = []
    start: Any = 0
    for section in sections:
        end = section if isinstance(start, int) and start == 0 else start + section
        pieces.append(_slice_dim(tensor, d, start, end))
        start = end
    return tuple(pieces)


@register("torch.Tensor.split_with_sizes", "torch.split_with_sizes")
def split_with_sizes(tensor: TensorProxy, split_sizes: Sequence, dim: int = 0) -> tuple:
    return split(tensor, list(split_sizes), dim)


@register("torch.chunk", "torch.Tensor.chunk")
def chunk(input: TensorProxy, chunks: int, dim: int = 0) -> tuple:
    chunks = int(chunks)
    check(chunks > 0, lambda: f"chunk: chunks must be positive, got {chunks}{called_at()}", ValueError)
    d = canonical_dim(dim, input.ndim)
    size = input.shape[d]
    if bool(size == 0):
        return tuple(_slice_dim(input, d, 0, 0) for _ in range(chunks))  # as torch: `chunks` empty pieces
    return split(input, (size + (chunks - 1)) // chunks, d)  # pieces of ceil(size / chunks), at least 1


@register("torch.narrow", "torch.Tensor.narrow")
def narrow(input: TensorProxy, dim: int, start: Any, length: Any) -> Any:
    d = canonical_dim(dim, input.ndim)
    if isinstance(start, TensorProxy):
        return _narrow_at_tensor(input, d, start, length)
    if isinstance(start, int) and start < 0:
        start = start + input.shape[d]
    check(
        bool(start >= 0) and bool(length >= 0) and bool(start + length <= input.shape[d]),
        lambda: f"narrow: start ({start}) + length ({length}) exceeds dim {d} of size {input.shape[d]}{called_at()}",
        IndexError,
    )
    return _slice_dim(input, d, start, start + length)


def _narrow_at_tensor(input: TensorProxy, d: int, start: TensorProxy, length: Any) -> TensorProxy:
    """narrow with a 0-d tensor start, whose value tracing cannot know: gathers the rows
    start, ..., start + length - 1 with index_select (out of range indices fail when it runs)."""
    check(
        start.ndim == 0 and not start.dtype.is_floating_point and start.dtype != torch.bool,
        lambda: (
            f"narrow: a tensor start must be a 0-d integer tensor, got {start.dtype}{list(start.shape)}{called_at()}"
        ),
        TypeError,
    )
    size = input.shape[d]
    check(
        bool(length >= 0) and bool(length <= size),
        lambda: f"narrow: length {length} must be in [0, {size}] (the size of dim {d}){called_at()}",
        IndexError,
    )
    first = to_dtype(start, torch.int64)
    first = prims.where(prims.lt(first, 0), prims.add(first, size), first)
    offsets = prims.iota(length, 0, 1, torch.int64, input.device)
    return prims.index_select(input, d, prims.add(offsets, prims.broadcast_in_dim(first, [length], [])))


@register("torch.unbind", "torch.Tensor.unbind")
def unbind(input: TensorProxy, dim: int = 0) -> tuple:
    d = canonical_dim(dim, input.ndim)
    return tuple(prims.squeeze(_slice_dim(input, d, i, i + 1), [d]) for i in range(int(input.shape[d])))


# ---------------------------------------------------------------------------------------------
# Basic indexing


def _clamp_bound(value: Any, size: Any, default: Any) -> Any:
    """A Python slice bound normalised to [0, size] (negative values count from the end)."""
    if value is None:
        return default
    if isinstance(value, TensorProxy):
        value = operator.index(value)  # a tensor whose value is known while tracing (ops/known_values.py)
    if isinstance(value, int) and isinstance(size, int):
        value = value + size if value < 0 else value
        return min(max(value, 0), size)
    if bool(value < 0):
        value = value + size
        return 0 if bool(value < 0) else value
    return size if bool(value > size) else value


def _expand_key(key: Any, ndim: int) -> list:
    items = list(key) if isinstance(key, tuple) else [key]
    consumed = sum(1 for k in items if k is not None and k is not Ellipsis)
    check(
        sum(1 for k in items if k is Ellipsis) <= 1,
        lambda: f"an index can only have a single ellipsis{called_at()}",
        IndexError,
    )
    check(
        consumed <= ndim,
        lambda: f"too many indices for a tensor of dimension {ndim}{called_at()}",
        IndexError,
    )
    if Ellipsis in [k for k in items if not isinstance(k, (TensorProxy, NumberProxy))]:
        at = next(i for i, k in enumerate(items) if k is Ellipsis)
        items[at : at + 1] = [slice(None)] * (ndim - consumed)
    return items + [slice(None)] * (ndim - sum(1 for k in items if k is not None))


def getitem(input: TensorProxy, key: Any) -> Any:
    """Basic indexing (ints, slices, None, Ellipsis): a view. `torch.Tensor.__getitem__` is
    registered in ops/advanced_indexing.py, which also takes index tensors and lists."""
    items = _expand_key(key, input.ndim)
    starts, ends, steps, squeezed, new_axes = [], [], [], [], []
    dim = 0
    out_dim = 0
    for item in items:
        if item is None:
            new_axes.append(out_dim)
            out_dim += 1
            continue
        size = input.shape[dim]
        if isinstance(item, slice):
            step = 1 if item.step is None else int(item.step)
            check(
                step > 0,
                lambda step=step: f"slice steps must be positive, got {step}{called_at()}",
                ValueError,
            )
            start = _clamp_bound(item.start, size, 0)
            stop = _clamp_bound(item.stop, size, size)
            stop = start if not (isinstance(start, int) and isinstance(stop, int)) and bool(stop < start) else stop
            if isinstance(start, int) and isinstance(stop, int):
                stop = max(stop, start)
            starts.append(start)
            ends.append(stop)
            steps.append(step)
            out_dim += 1
        elif isinstance(item, (int, NumberProxy)) and not isinstance(item, bool):
            index = item
            check(
                bool(index < size) and bool(index >= -size),
                lambda index=index, size=size, dim=dim: (
                    f"index {index} is out of bounds for dim {dim} with size {size}{called_at()}"
                ),
                IndexError,
            )
            if bool(index < 0):
                index = index + size
            starts.append(index)
            ends.append(index + 1)
            steps.append(1)
            squeezed.append(dim)
        else:
            raise NotImplementedError(
                f"indexing with {type(item).__name__} {item!r} is not supported (ints, slices, None, Ellipsis "
                f"and one 1-D integer tensor are){called_at()}"
            )
        dim += 1
    out = input
    full = all(
        (isinstance(s, int) and s == 0) and (e is size or (isinstance(e, int) and e == size)) and st == 1
        for s, e, st, size in zip(starts, ends, steps, input.shape)
    )
    if not full:
        out = prims.slice(out, starts, ends, steps)
    if squeezed:
        out = prims.squeeze(out, squeezed)
    for axis in new_axes:
        out = unsqueeze(out, axis)
    return out
