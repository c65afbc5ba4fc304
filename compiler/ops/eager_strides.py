"""eager's strides, as pure functions of shapes, strides and the prim that made a tensor: the model
`aliasing.layout` walks a trace with (compiler/ops/aliasing.py).

A layout is a tuple of strides where the shape is concrete. Where a size is symbolic the strides are
not numbers, but one fact often still holds whatever the sizes: the tensor is row-major contiguous
(`ROW_MAJOR`): a fresh matmul, reduction or copy, an elementwise result of a row-major operand of
its own shape, a reshape, squeeze or unsqueeze of one. A reshape of such a tensor is a view and
`is_contiguous()` is true, as in eager; anything else of symbolic size is unknown (None).
"""

from __future__ import annotations

from typing import Final

from compiler import prims
from compiler.core.ir import BoundSymbol, TensorProxy
from compiler.prims import Prim

Strides = tuple[int, ...]


class _RowMajor:
    """The layout of a row-major contiguous tensor whose sizes are symbolic (see the module)."""

    def __repr__(self) -> str:
        return "ROW_MAJOR"


ROW_MAJOR: Final = _RowMajor()
Layout = Strides | _RowMajor | None

# Prims whose output takes its layout from its tensor operands the way TensorIterator does
# (elementwise ops; clone-like ops follow their first operand); other outputs are contiguous,
# except attention's, which depends on the device's kernel.
_ITERATOR_LAYOUT = prims.ELEMENTWISE
_FIRST_OPERAND_LAYOUT = frozenset({Prim.INDEX_COPY, Prim.INDEX_ADD, Prim.SLICE_UPDATE})
_UNKNOWN_LAYOUT = frozenset({Prim.SDPA, Prim.SDPA_FORWARD, Prim.SDPA_BACKWARD})
# View prims that keep a row-major tensor row-major whatever its sizes (broadcast_in_dim where it
# only adds dims of size 1, permute where it keeps the order: see `_row_major_view`)
_ROW_MAJOR_VIEWS = frozenset(
    {Prim.STOP_GRADIENT, Prim.RESHAPE, Prim.SQUEEZE, Prim.UPDATED_WITHOUT_GRAD, Prim.OVERWRITTEN}
)


def concrete(shape: tuple | list) -> bool:
    """Whether every size of `shape` is an int (none symbolic)."""
    return all(type(s) is int for s in shape)


def row_major(shape: tuple | list) -> Layout:
    """The layout of a row-major contiguous tensor of `shape`: its strides, or `ROW_MAJOR` where a
    size is symbolic."""
    return contiguous_strides(shape) if concrete(shape) else ROW_MAJOR


def _same_shape(a: tuple | list, b: tuple | list) -> bool:
    """Whether two shapes are the same sizes (symbolic ones by identity: comparing them would record a guard)."""
    return len(a) == len(b) and all(x is y or (type(x) is int and type(y) is int and x == y) for x, y in zip(a, b))


def contiguous_strides(shape: tuple | list) -> Strides | None:
    """Row-major strides of `shape` (None when a size is symbolic)."""
    if not concrete(shape):
        return None
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def view_strides(shape: tuple | list, strides: Strides, new_shape: tuple | list) -> Strides | None:
    """Strides of `new_shape` viewing a tensor of `shape`/`strides`, or None when no view exists
    (ATen's computeStride; sizes must be concrete)."""
    if not shape:
        return tuple(1 for _ in new_shape)
    if 0 in shape:
        return contiguous_strides(new_shape)
    new_strides = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base_stride = strides[-1]
    tensor_numel, view_numel = 1, 1
    for tensor_d in range(len(shape) - 1, -1, -1):
        tensor_numel *= shape[tensor_d]
        if tensor_d == 0 or (shape[tensor_d - 1] != 1 and strides[tensor_d - 1] != tensor_numel * chunk_base_stride):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_strides[view_d] = view_numel * chunk_base_stride
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride = strides[tensor_d - 1]
                tensor_numel, view_numel = 1, 1
    return tuple(new_strides) if view_d == -1 else None


def iterator_strides(shape: tuple | list, operands: list[Strides]) -> Strides | None:
    """The strides TensorIterator gives the output of an elementwise op on operands of `shape`
    with these strides (ATen's `reorder_dimensions`: dims ordered by the operands' strides, the
    first operand that tells two dims apart decides, broadcast dims never do)."""
    if not concrete(shape):
        return None
    ndim = len(shape)

    def should_swap(d0: int, d1: int) -> int:
        for strides in operands:
            s0, s1 = strides[d0], strides[d1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 != s1:
                return 1 if s0 > s1 else -1
            if shape[d0] > shape[d1]:
                return 1
        return 0

    perm = list(range(ndim - 1, -1, -1))  # fastest dim first
    for i in range(1, ndim):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            comparison = should_swap(perm[d0], perm[d1])
            if comparison > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif comparison < 0:
                break
    strides, step = [0] * ndim, 1
    for d in perm:
        strides[d] = step
        step *= max(shape[d], 1)
    return tuple(strides)


def expands(link: BoundSymbol) -> bool:
    """Whether a broadcast_in_dim link repeats elements (a real expand, not an unsqueeze)."""
    a, shape, broadcast_dims = link.args
    kept = dict(zip(broadcast_dims, a.shape))
    for d, size in enumerate(shape):
        if type(size) is int and size == 1:
            continue
        source = kept.get(d)
        if source is None or (type(source) is int and source == 1):
            return True
    return False


def _view_layout(link: BoundSymbol, src: Strides) -> Strides | None:
    prim, a = link.sym, link.args[0]
    if prim is Prim.STOP_GRADIENT:
        return src
    if prim is Prim.SLICE:
        return tuple(s * step for s, step in zip(src, link.args[3]))
    if prim is Prim.PERMUTE:
        return tuple(src[i] for i in link.args[1])
    if prim is Prim.SQUEEZE:
        return tuple(s for i, s in enumerate(src) if i not in link.args[1])
    if prim is Prim.BROADCAST_IN_DIM:
        shape, broadcast_dims = link.args[1], link.args[2]
        strides = [0] * len(shape)
        for i, d in enumerate(broadcast_dims):
            repeated = type(a.shape[i]) is int and a.shape[i] == 1 and not (type(shape[d]) is int and shape[d] == 1)
            strides[d] = 0 if repeated else src[i]
        return tuple(strides)
    if not (concrete(a.shape) and concrete(link.args[1])):
        return None
    return view_strides(a.shape, src, link.args[1]) or contiguous_strides(link.args[1])


def _row_major_view(link: BoundSymbol, out: TensorProxy) -> Layout:
    """The layout of `out`, a view (made by `link`) of a row-major tensor of symbolic size."""
    prim = link.sym
    keeps = (
        prim in _ROW_MAJOR_VIEWS
        or (prim is Prim.BROADCAST_IN_DIM and not expands(link))
        or (prim is Prim.PERMUTE and list(link.args[1]) == sorted(link.args[1]))
    )
    return row_major(out.shape) if keeps else None


def _iterator_row_major(out: TensorProxy, operands: list[tuple[TensorProxy, Layout]]) -> Layout:
    """`ROW_MAJOR` for an elementwise output of symbolic size whose layout TensorIterator takes from
    a row-major operand of its shape, else None (unknown). The first operand that orders two dims
    decides (as in `iterator_strides`): an operand with at most one dim of nonzero stride (a
    broadcast bias or scalar) orders none; a row-major one orders every pair of dims of size > 1."""
    for operand, strides in operands:
        if type(strides) is tuple and sum(s != 0 for s in strides) <= 1:
            continue
        return ROW_MAJOR if strides is ROW_MAJOR and _same_shape(operand.shape, out.shape) else None
    return None


def layout_of(bsym: BoundSymbol, out: TensorProxy, operands: list[tuple[TensorProxy, Layout]]) -> Layout:
    """eager's layout for `out`, one of the outputs of `bsym`, given its operands' layouts."""
    if bsym.sym in prims.VIEWS:
        src = operands[0][1]
        if src is ROW_MAJOR:
            return _row_major_view(bsym, out)
        return None if src is None else _view_layout(bsym, src)
    if bsym.sym in _UNKNOWN_LAYOUT:
        return None
    if bsym.sym in (Prim.CONVOLUTION, Prim.CONVOLUTION_TRANSPOSE):  # contiguous from contiguous; cuDNN picks others
        source, strides = operands[0]
        return row_major(out.shape) if strides in (ROW_MAJOR, contiguous_strides(source.shape)) else None
    if bsym.sym in _ITERATOR_LAYOUT or bsym.sym in _FIRST_OPERAND_LAYOUT:
        followed = operands[:1] if bsym.sym in _FIRST_OPERAND_LAYOUT else operands
        if not concrete(out.shape):
            return _iterator_row_major(out, followed)
        if any(s is None or s is ROW_MAJOR for _, s in followed):
            return None
        return iterator_strides(out.shape, [s for _, s in followed])
    return row_major(out.shape)
