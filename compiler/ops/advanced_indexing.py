"""Advanced indexing: `x[key]` with index tensors or lists in the key, `index_put(_)`, and the
data-dependent ops (bool masks, `nonzero`) rejected with a message that points at `torch.where`.

torch applies the ints, slices, None and Ellipsis of a key first (a view, `shape.getitem`); the
integer index tensors (lists become constant int64 tensors) then broadcast together to a shape B
and select. Their result dims go where the first of them was when they are adjacent in the key,
and first otherwise. Negative indices count from the end, as in eager.

Both directions use one linearization: the indexed dims are moved to the front and flattened into
one dim, the index tensors combine into one linear index (row-major over the indexed sizes), and
`prims.index_select` reads (`prims.index_add` / `prims.index_copy` write) along that dim.
Out-of-range indices are not checked (they depend on values); the executors raise on them.

One list of ints that steps evenly upward along one dim (`qkv[..., [-2]]`, as Falcon splits its
keys off, or `x[:, [0, 2, 4]]`) selects what a slice does: it is recorded as that slice, copied
(advanced indexing copies), so it fuses with what reads it and its gradient is a slice's (joined
with its neighbours' into one cat, `passes/autodiff`), not an index_add into zeros.
"""

from __future__ import annotations

import itertools
from typing import Any

import torch

from compiler import prims
from compiler.core import dtypes
from compiler.core.errors import called_at, check
from compiler.core.ir import NumberProxy, TensorProxy, size_product
from compiler.ops import shape
from compiler.ops.aliasing import fresh_copy, reshapes_as
from compiler.ops.operands import broadcast_shapes, broadcast_to, to_dtype
from compiler.ops.registry import register

_DATA_DEPENDENT = (
    "is not supported: it gives a result whose shape depends on the values of a tensor, which a trace "
    "cannot know; "
    "keep the shape fixed instead: torch.where(mask, x, other) or x.masked_fill(~mask, value) to select, "
    "(x * mask).sum() to reduce over the selected elements"
)


def _is_advanced(item: Any) -> bool:
    return isinstance(item, (TensorProxy, list)) and not isinstance(item, torch.Size)


def _check_not_mask(item: Any, what: str) -> None:
    check(
        not (isinstance(item, TensorProxy) and item.dtype == torch.bool) and not _is_bool_list(item),
        lambda: f"{what} with a bool mask {_DATA_DEPENDENT}{called_at()}",
        NotImplementedError,
    )


def _is_bool_list(item: Any) -> bool:
    return isinstance(item, (list, tuple)) and any(
        isinstance(v, bool) or _is_bool_list(v) for v in item if not isinstance(v, TensorProxy)
    )


def _constant_index(values: list, device: torch.device) -> TensorProxy:
    """A list (possibly nested) of ints as an int64 tensor of the list's shape."""
    sizes, flat, level = [], [], [values]
    while level and all(isinstance(v, (list, tuple)) for v in level):
        sizes.append(len(level[0]))
        check(
            all(len(v) == sizes[-1] for v in level),
            lambda: f"an index list must be rectangular, got {values!r}{called_at()}",
            IndexError,
        )
        level = [x for v in level for x in v]
    flat = level
    check(
        all(isinstance(v, (int, NumberProxy)) and not isinstance(v, bool) for v in flat),
        lambda: f"index lists must hold ints, got {values!r}{called_at()}",
        IndexError,
    )
    if not flat:
        return prims.full(sizes, 0, torch.int64, device)
    pieces = [prims.full([1], v, torch.int64, device) for v in flat]
    joined = pieces[0] if len(pieces) == 1 else prims.cat(pieces, 0)
    return prims.reshape(joined, sizes) if sizes != [len(flat)] else joined


def _index_tensor(item: Any, size: Any, device: torch.device) -> TensorProxy:
    """`item` as an int64 index tensor with negative entries counted from the end of `size`."""
    index = _constant_index(item, device) if isinstance(item, list) else item
    check(
        dtypes.is_integer(index.dtype),
        lambda: f"tensors used as indices must be long, int or bool tensors, got {index.dtype}{called_at()}",
        IndexError,
    )
    index = to_dtype(index, torch.int64)
    if index.device != device and index.device.type == "cpu":  # eager indexes a tensor on any device with CPU indices
        index = prims.device_put(index, device)
    return prims.where(prims.lt(index, 0), prims.add(index, size), index)


def split_key(input: TensorProxy, key: Any) -> tuple[TensorProxy, list[tuple[int, Any]]]:
    """(the basic-indexing view of `input` by `key`, [(its dim, index item)] for the advanced items)."""
    items = list(key) if isinstance(key, tuple) else [key]
    for item in items:
        _check_not_mask(item, "indexing")
    consumed = sum(1 for k in items if k is not None and k is not Ellipsis)
    if any(k is Ellipsis for k in items if not isinstance(k, (TensorProxy, list))):
        at = next(i for i, k in enumerate(items) if not isinstance(k, (TensorProxy, list)) and k is Ellipsis)
        items[at : at + 1] = [slice(None)] * max(input.ndim - consumed, 0)
    basic, advanced, out_dim = [], [], 0
    for item in items:
        if _is_advanced(item):
            advanced.append((out_dim, item))
            basic.append(slice(None))
            out_dim += 1
        elif item is None or isinstance(item, slice):
            basic.append(item)
            out_dim += 1
        else:
            basic.append(item)
    return shape.getitem(input, tuple(basic)), advanced


def _linear_index(base: TensorProxy, advanced: list[tuple[int, Any]]) -> tuple[TensorProxy, list, list[int]]:
    """(the linear index of shape B, B, the indexed dims of `base`)."""
    dims = [d for d, _ in advanced]
    indices = [_index_tensor(item, base.shape[d], base.device) for d, item in advanced]
    batch = list(broadcast_shapes(*(i.shape for i in indices)))
    linear = None
    for k, index in enumerate(indices):
        stride = size_product(base.shape[e] for e in dims[k + 1 :])
        term = broadcast_to(index, batch)
        term = term if isinstance(stride, int) and stride == 1 else prims.mul(term, stride)
        linear = term if linear is None else prims.add(linear, term)
    return linear, batch, dims


def _to_front(t: TensorProxy, dims: list[int]) -> TensorProxy:
    """`t` with `dims` moved to the front and flattened into one dim."""
    rest = [d for d in range(t.ndim) if d not in dims]
    perm = dims + rest
    moved = t if perm == list(range(t.ndim)) else prims.permute(t, perm)
    return prims.reshape(moved, [size_product(t.shape[d] for d in dims), *(t.shape[d] for d in rest)])


def _result_position(dims: list[int]) -> int:
    """Where B's dims go in the result: at the first indexed dim if the indexed dims are adjacent."""
    return dims[0] if dims == list(range(dims[0], dims[0] + len(dims))) else 0


def _move(t: TensorProxy, start: int, count: int, to: int) -> TensorProxy:
    """`t` with its dims [start, start + count) moved to begin at `to`."""
    if start == to or count == 0:
        return t
    block = list(range(start, start + count))
    others = [d for d in range(t.ndim) if d not in block]
    perm = others[:to] + block + others[to:]
    return prims.permute(t, perm)


def gather_advanced(base: TensorProxy, advanced: list[tuple[int, Any]]) -> TensorProxy:
    """`base[...]` selected by the advanced items at their dims (see the module)."""
    linear, batch, dims = _linear_index(base, advanced)
    rest = [base.shape[d] for d in range(base.ndim) if d not in dims]
    selected = prims.index_select(_to_front(base, dims), 0, prims.reshape(linear, [size_product(batch)]))
    out = prims.reshape(selected, [*batch, *rest])
    return _move(out, 0, len(batch), _result_position(dims))


def _as_slice(base: TensorProxy, advanced: list[tuple[int, Any]]) -> TensorProxy | None:
    """`base` selected by one flat list of ints in range that steps evenly upward, as that slice
    copied; None for any other selection (several items, a tensor, a nested or empty list,
    symbolic sizes, a step down or uneven)."""
    if len(advanced) != 1:
        return None
    dim, item = advanced[0]
    size = base.shape[dim]
    if not isinstance(item, list) or not item or type(size) is not int or any(type(v) is not int for v in item):
        return None
    at = [v + size if v < 0 else v for v in item]
    step = at[1] - at[0] if len(at) > 1 else 1
    if not 0 <= at[0] <= at[-1] < size or step < 1 or any(b - a != step for a, b in itertools.pairwise(at)):
        return None
    key = tuple(slice(at[0], at[-1] + 1, step) if d == dim else slice(None) for d in range(base.ndim))
    return fresh_copy(shape.getitem(base, key))


@register("torch.Tensor.__getitem__")
def getitem(input: TensorProxy, key: Any) -> Any:
    items = key if isinstance(key, tuple) else (key,)
    if not any(_is_advanced(k) for k in items):
        return shape.getitem(input, key)
    base, advanced = split_key(input, key)
    sliced = _as_slice(base, advanced)
    return sliced if sliced is not None else gather_advanced(base, advanced)


def put_advanced(base: TensorProxy, advanced: list[tuple[int, Any]], values: Any, accumulate: bool) -> TensorProxy:
    """`base` with the elements the advanced items select replaced by (or, accumulating,
    increased by) `values`, broadcast to the selection's shape; a new tensor."""
    linear, batch, dims = _linear_index(base, advanced)
    rest = [base.shape[d] for d in range(base.ndim) if d not in dims]
    position = _result_position(dims)
    selection = [*rest[:position], *batch, *rest[position:]]
    if not isinstance(values, TensorProxy):
        values = prims.full(selection, to_dtype(values, base.dtype), base.dtype, base.device)
    check(
        list(broadcast_shapes(values.shape, selection)) == selection
        or tuple(broadcast_shapes(values.shape, selection)) == tuple(selection),
        lambda: (
            f"shape mismatch: value tensor of shape {values.shape} cannot be broadcast to indexing result "
            f"of shape {tuple(selection)}{called_at()}"
        ),
        RuntimeError,
    )
    values = _move(broadcast_to(to_dtype(values, base.dtype), selection), position, len(batch), 0)
    # NOTE: these reshapes are only read (the update makes a new tensor), so a write into `base`
    # later does not depend on whether eager would have viewed or copied.
    with reshapes_as("read"):
        source = prims.reshape(values, [size_product(batch), *rest])
        flat_index = prims.reshape(linear, [size_product(batch)])
        flat = _to_front(base, dims)
        updated = (prims.index_add if accumulate else prims.index_copy)(flat, 0, flat_index, source)
        rest_dims = [d for d in range(base.ndim) if d not in dims]
        unflat = prims.reshape(updated, [*(base.shape[d] for d in dims), *rest])
    perm = dims + rest_dims
    if perm == list(range(base.ndim)):
        return unflat
    inverse = [perm.index(d) for d in range(base.ndim)]
    return prims.permute(unflat, inverse)


@register("torch.index_put", "torch.Tensor.index_put")
def index_put(input: TensorProxy, indices: Any, values: Any, accumulate: bool = False) -> TensorProxy:
    check(
        isinstance(indices, (tuple, list)) and len(indices) <= input.ndim,
        lambda: f"index_put: indices must be a tuple of at most {input.ndim} tensors, got {indices!r}{called_at()}",
        IndexError,
    )
    check(
        isinstance(values, TensorProxy) and values.dtype == input.dtype,
        lambda: (
            f"index_put: values must be a tensor of the input's dtype {input.dtype}, got "
            f"{getattr(values, 'dtype', type(values).__name__)}{called_at()}"
        ),
        RuntimeError,
    )
    for index in indices:
        check(
            index is None or isinstance(index, TensorProxy),
            lambda index=index: f"index_put: indices must be tensors or None, got {index!r}{called_at()}",
            TypeError,
        )
        _check_not_mask(index, "index_put")
    advanced = [(d, index) for d, index in enumerate(indices) if index is not None]
    check(advanced, lambda: f"index_put: at least one index must be a tensor, got {indices!r}{called_at()}", IndexError)
    return put_advanced(input, advanced, values, accumulate)


def _data_dependent(name: str) -> Any:
    def op(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{name} {_DATA_DEPENDENT}{called_at()}")

    return op


for _name in ("torch.nonzero", "torch.Tensor.nonzero", "torch.argwhere", "torch.Tensor.argwhere"):
    register(_name)(_data_dependent(_name))
for _name in ("torch.masked_select", "torch.Tensor.masked_select", "torch.unique", "torch.Tensor.unique"):
    register(_name)(_data_dependent(_name))
