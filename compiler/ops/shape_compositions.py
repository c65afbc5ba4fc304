"""Shape and selection ops written with other ops: unflatten, select, tensor_split and
hsplit/vsplit/dsplit, the hstack/vstack/dstack/column_stack family, diagonal, unfold, take_along_dim, index_fill and
count_nonzero, torch.eye.

`diagonal` and `unfold` are views in eager. A diagonal is made of the IR's view prims (a permute,
a reshape and a strided slice), which view elements in logical order, so a write through it
reaches its source as eager's does. `unfold`'s windows overlap, which no view prim expresses: it
gathers a new tensor, which `aliasing.forbid_writes` marks so that writing through it raises
instead of leaving the source unchanged.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import torch

from compiler import prims
from compiler.core import dtypes
from compiler.core.errors import called_at, check
from compiler.core.ir import NumberProxy, TensorProxy, canonical_device, same_size, size_product
from compiler.ops import aliasing
from compiler.ops.indexing import gather
from compiler.ops.operands import broadcast_shapes, broadcast_to, canonical_dim, to_dtype
from compiler.ops.reductions import sum as sum_op
from compiler.ops.registry import register
from compiler.ops.shape import cat, getitem, narrow, reshape
from compiler.ops.symbolic_sizes import quotient_of_products


@register("torch.unflatten", "torch.Tensor.unflatten")
def unflatten(input: TensorProxy, dim: int, sizes: Sequence) -> TensorProxy:
    """Dim `dim` split into `sizes` (one of them may be -1)."""
    d = canonical_dim(dim, input.ndim)
    sizes = list(sizes)
    inferred = [i for i, s in enumerate(sizes) if type(s) is int and s == -1]
    if len(inferred) == 1:
        # NOTE: eager infers the -1 from dim `dim`'s own size, so it is known in an empty tensor too
        known = size_product(s for i, s in enumerate(sizes) if i != inferred[0])
        check(
            not same_size(known, 0) and same_size(input.shape[d] % known, 0),
            lambda: f"unflatten: sizes {sizes} do not split dim {dim} of size {input.shape[d]}{called_at()}",
            RuntimeError,
        )
        sizes[inferred[0]] = quotient_of_products(
            [input.shape[d]], [s for i, s in enumerate(sizes) if i != inferred[0]]
        )
    return reshape(input, [*input.shape[:d], *sizes, *input.shape[d + 1 :]])


@register("torch.select", "torch.Tensor.select")
def select(input: TensorProxy, dim: int, index: Any) -> TensorProxy:
    """input[..., index, ...] at dim `dim` (a view, as basic indexing)."""
    d = canonical_dim(dim, input.ndim)
    return getitem(input, (*(slice(None),) * d, index))


@register("torch.tensor_split", "torch.Tensor.tensor_split")
def tensor_split(input: TensorProxy, indices_or_sections: Any, dim: int = 0) -> tuple:
    """Pieces along `dim`: `n` sections (the first size % n one longer) or cut at the given indices."""
    d = canonical_dim(dim, input.ndim)
    size = input.shape[d]  # NOTE: a symbolic size stays symbolic: the cuts are formulas of it
    if isinstance(indices_or_sections, (int, NumberProxy)):
        sections = int(indices_or_sections)
        check(sections > 0, lambda: f"tensor_split: sections must be positive, got {sections}{called_at()}", ValueError)
        # the first size % sections pieces are one longer: piece i starts at i * small + min(i, extra)
        small, extra = size // sections, size % sections
        cuts = [0, *(i * small + prims.minimum(i, extra) for i in range(1, sections + 1))]
        bounds = list(itertools.pairwise(cuts))
    else:
        check(
            not isinstance(indices_or_sections, TensorProxy),
            lambda: (
                f"tensor_split: indices given as a tensor need its values, which are not known while tracing; "
                f"pass a list of ints{called_at()}"
            ),
            NotImplementedError,
        )
        cuts = [min(max(int(i) + size if int(i) < 0 else int(i), 0), size) for i in indices_or_sections]
        starts, ends = [0, *cuts], [*cuts, size]
        bounds = [(s, max(s, e)) for s, e in zip(starts, ends)]
    return tuple(narrow(input, d, start, end - start) for start, end in bounds)


def _split_along(name: str, dim: int, least: int, input: TensorProxy, indices_or_sections: Any) -> tuple:
    """torch.hsplit / vsplit / dsplit: tensor_split along `dim`, a number of sections dividing it evenly."""
    check(
        input.ndim >= least,
        lambda: f"torch.{name} requires a tensor with at least {least} dimension, but got {input.ndim}{called_at()}",
        RuntimeError,
    )
    if isinstance(indices_or_sections, (int, NumberProxy)):
        sections, size = int(indices_or_sections), int(input.shape[dim])
        check(
            sections != 0 and size % sections == 0,
            lambda: (
                f"torch.{name} attempted to split along dimension {dim}, but the size of the dimension {size} "
                f"is not divisible by the split_size {sections}!{called_at()}"
            ),
            RuntimeError,
        )
    return tensor_split(input, indices_or_sections, dim)


@register("torch.hsplit", "torch.Tensor.hsplit")
def hsplit(input: TensorProxy, indices_or_sections: Any) -> tuple:
    """Pieces along the columns (dim 1; dim 0 of a 1-D tensor)."""
    return _split_along("hsplit", 0 if input.ndim == 1 else 1, 1, input, indices_or_sections)


@register("torch.vsplit", "torch.Tensor.vsplit")
def vsplit(input: TensorProxy, indices_or_sections: Any) -> tuple:
    """Pieces along the rows (dim 0) of a tensor of at least 2 dims."""
    return _split_along("vsplit", 0, 2, input, indices_or_sections)


@register("torch.dsplit", "torch.Tensor.dsplit")
def dsplit(input: TensorProxy, indices_or_sections: Any) -> tuple:
    """Pieces along the depth (dim 2) of a tensor of at least 3 dims."""
    return _split_along("dsplit", 2, 3, input, indices_or_sections)


def _at_least(t: TensorProxy, ndim: int) -> TensorProxy:
    """torch.atleast_{1,2,3}d: 0-d -> [1]*ndim, 1-d [n] -> [1, n] (2-D) or [1, n, 1] (3-D), 2-D -> [m, n, 1]."""
    if t.ndim >= ndim:
        return t
    shapes = {0: [1] * ndim, 1: [1, *t.shape] + [1] * (ndim - 2), 2: [*t.shape, 1]}
    return reshape(t, shapes[t.ndim])


def _at_least_op(ndim: int) -> None:
    @register(f"torch.atleast_{ndim}d")
    def op(*tensors: Any) -> Any:
        many = len(tensors) != 1 or isinstance(tensors[0], (list, tuple))
        flat = tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else tensors
        results = tuple(_at_least(t, ndim) for t in flat)
        return results if many else results[0]


for _ndim in (1, 2, 3):
    _at_least_op(_ndim)


@register("torch.broadcast_tensors")
def broadcast_tensors(*tensors: TensorProxy) -> tuple[TensorProxy, ...]:
    """Each tensor expanded to the broadcast shape of all (views, as eager's)."""
    shape = broadcast_shapes(*(t.shape for t in tensors))
    return tuple(broadcast_to(t, shape) for t in tensors)


@register("torch.hstack")
def hstack(tensors: Sequence[TensorProxy], *, out: Any = None) -> TensorProxy:
    check(out is None, lambda: f"torch.hstack: out= is not supported{called_at()}", NotImplementedError)
    pieces = [_at_least(t, 1) for t in tensors]
    return cat(pieces, 0 if pieces and pieces[0].ndim == 1 else 1)


@register("torch.vstack", "torch.row_stack")
def vstack(tensors: Sequence[TensorProxy], *, out: Any = None) -> TensorProxy:
    check(out is None, lambda: f"torch.vstack: out= is not supported{called_at()}", NotImplementedError)
    return cat([_at_least(t, 2) for t in tensors], 0)


@register("torch.dstack")
def dstack(tensors: Sequence[TensorProxy], *, out: Any = None) -> TensorProxy:
    check(out is None, lambda: f"torch.dstack: out= is not supported{called_at()}", NotImplementedError)
    return cat([_at_least(t, 3) for t in tensors], 2)


@register("torch.column_stack")
def column_stack(tensors: Sequence[TensorProxy], *, out: Any = None) -> TensorProxy:
    check(out is None, lambda: f"torch.column_stack: out= is not supported{called_at()}", NotImplementedError)
    return cat([reshape(t, [t.numel(), 1]) if t.ndim <= 1 else t for t in tensors], 1)


@register("torch.diagonal", "torch.Tensor.diagonal")
def diagonal(input: TensorProxy, offset: int = 0, dim1: int = 0, dim2: int = 1) -> TensorProxy:
    """The diagonal of dims (dim1, dim2), shifted by `offset`, as a last dim: the two dims moved to
    the end and flattened, then every (columns + 1)-th element from the first on the diagonal."""
    d1, d2 = canonical_dim(dim1, input.ndim), canonical_dim(dim2, input.ndim)
    check(d1 != d2, lambda: f"diagonal: dim1 and dim2 cannot be equal, got {dim1} and {dim2}{called_at()}", ValueError)
    if isinstance(input.shape[d1], int) and not isinstance(input.shape[d2], int):
        # NOTE: the same diagonal along the transposed dims, whose columns, the slice's step, are an int
        d1, d2, offset = d2, d1, -offset
    # NOTE: a slice's step is an int: a symbolic column count is specialised (guarded) to its value
    rows, cols = input.shape[d1], int(input.shape[d2])
    length = prims.maximum(0, prims.minimum(rows + min(offset, 0), cols - max(offset, 0)))
    rest = [d for d in range(input.ndim) if d not in (d1, d2)]
    moved = input if rest + [d1, d2] == list(range(input.ndim)) else prims.permute(input, [*rest, d1, d2])
    batch = [input.shape[d] for d in rest]
    with aliasing.reshapes_as("element_view"):
        flat = reshape(moved, [*batch, rows * cols])
    first = -offset * cols if offset < 0 else offset
    if same_size(length, 0):
        return narrow(flat, -1, 0, 0)
    return getitem(flat, (..., slice(first, first + (length - 1) * (cols + 1) + 1, cols + 1)))


@register("torch.Tensor.unfold")
def unfold(input: TensorProxy, dimension: int, size: int, step: int) -> TensorProxy:
    """Windows of `size` every `step` along `dimension`: that dim becomes the window count and a
    last dim of `size` is added (a gather of the window positions, a view in eager)."""
    d = canonical_dim(dimension, max(input.ndim, 1))
    source = reshape(input, [1]) if input.ndim == 0 else input
    length = source.shape[d]  # NOTE: a symbolic length stays symbolic: the window count is a formula of it
    check(
        size >= 0 and step > 0 and bool(size <= length),
        lambda: f"unfold: size {size} must be in [0, {length}] and step {step} positive{called_at()}",
        RuntimeError,
    )
    count = (length - size) // step + 1
    if size == 0:  # NOTE: no window has an element (count is at least 1: size <= length)
        picked = narrow(source, d, 0, 0)
    else:
        starts = prims.mul(prims.iota(count, 0, 1, torch.int64, input.device), step)
        grid = [count, size]
        offsets = prims.broadcast_in_dim(prims.iota(size, 0, 1, torch.int64, input.device), grid, [1])
        positions = prims.add(prims.broadcast_in_dim(starts, grid, [0]), offsets)
        picked = prims.index_select(source, d, reshape(positions, [count * size]))
    shape = [*source.shape[:d], count, size, *source.shape[d + 1 :]]
    windows = reshape(picked, shape)
    if input.ndim == 0:  # eager: a 0-d tensor's windows are one dim of `size` elements
        windows = reshape(windows, [size])
        aliasing.forbid_writes(windows, "unfold (a view in eager, a gathered copy here)")
        return windows
    out = windows if d == source.ndim - 1 else prims.permute(windows, [*range(d + 1), *range(d + 2, len(shape)), d + 1])
    aliasing.forbid_writes(out, "unfold (a view in eager, a gathered copy here)")
    return out


@register("torch.take_along_dim", "torch.Tensor.take_along_dim")
def take_along_dim(input: TensorProxy, indices: TensorProxy, dim: int | None = None, *, out: Any = None) -> TensorProxy:
    """input gathered at `indices` along `dim`, the other dims broadcast; without `dim`, of the flattened input."""
    check(out is None, lambda: f"torch.take_along_dim: out= is not supported{called_at()}", NotImplementedError)
    if dim is None:
        return gather(reshape(input, [-1]), 0, _wrapped(reshape(indices, [-1]), input.numel()))
    d = canonical_dim(dim, input.ndim)
    shape = list(broadcast_shapes(_with_one_at(input.shape, d), _with_one_at(indices.shape, d)))
    input_shape, indices_shape = list(shape), list(shape)
    input_shape[d], indices_shape[d] = input.shape[d], indices.shape[d]
    return gather(broadcast_to(input, input_shape), d, broadcast_to(_wrapped(indices, input.shape[d]), indices_shape))


def _wrapped(indices: TensorProxy, size: Any) -> TensorProxy:
    """Negative indices counted from the end (take_along_dim allows them, gather does not)."""
    indices = to_dtype(indices, torch.int64)
    return prims.where(prims.lt(indices, 0), prims.add(indices, size), indices)


def _with_one_at(shape: Sequence, d: int) -> list:
    return [1 if i == d else s for i, s in enumerate(shape)]


def _index_fill(input: TensorProxy, dim: int, index: TensorProxy, value: Any) -> TensorProxy:
    d = canonical_dim(dim, max(input.ndim, 1))
    check(
        isinstance(index, TensorProxy) and dtypes.is_integer(index.dtype) and index.ndim <= 1,
        lambda: f"index_fill: index must be a 0-d or 1-d integer tensor, got {index!r}{called_at()}",
        TypeError,
    )
    size = input.shape[d] if input.ndim else 1
    flat = to_dtype(reshape(index, [-1]), torch.int64)
    flat = prims.where(prims.lt(flat, 0), prims.add(flat, size), flat)
    count = flat.shape[0]
    positions = prims.broadcast_in_dim(prims.iota(size, 0, 1, torch.int64, input.device), [size, count], [0])
    hits = prims.eq(positions, prims.broadcast_in_dim(flat, [size, count], [1]))
    hit = prims.gt(prims.sum(to_dtype(hits, torch.int64), (1,)), 0)
    mask = prims.broadcast_in_dim(hit, list(input.shape), [d]) if input.ndim else reshape(hit, [])
    if isinstance(value, TensorProxy):
        check(value.ndim == 0, lambda: f"index_fill: value must be a 0-d tensor or a number{called_at()}", ValueError)
        fill = prims.broadcast_in_dim(to_dtype(value, input.dtype), list(input.shape), [])
        return prims.where(mask, fill, input)
    return prims.where(mask, to_dtype(value, input.dtype), input)


@register("torch.index_fill", "torch.Tensor.index_fill")
def index_fill(input: TensorProxy, dim: int, index: TensorProxy, value: Any) -> TensorProxy:
    """`input` with the slices at `index` along `dim` set to `value`."""
    return _index_fill(input, dim, index, value)


@register("torch.count_nonzero", "torch.Tensor.count_nonzero")
def count_nonzero(input: TensorProxy, dim: Any = None) -> TensorProxy:
    """How many elements are not zero, over `dim` (every dim by default), as int64."""
    return sum_op(prims.ne(input, 0), dim)


@register("torch.eye")
def eye(
    n: int,
    m: int | None = None,
    *,
    out: Any = None,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    pin_memory: bool = False,
) -> TensorProxy:
    """The identity matrix of n rows and m (default n) columns."""
    check(out is None, lambda: f"torch.eye: out= is not supported{called_at()}", NotImplementedError)
    columns = n if m is None else m
    where = canonical_device(device)
    rows = prims.broadcast_in_dim(prims.iota(n, 0, 1, torch.int64, where), [n, columns], [0])
    cols = prims.broadcast_in_dim(prims.iota(columns, 0, 1, torch.int64, where), [n, columns], [1])
    return to_dtype(prims.eq(rows, cols), dtype or torch.get_default_dtype())
