"""VJP rules of the structural prims: shapes, indexing and linear algebra (attention: `vjp_attention.py`).

Same contract as `vjp_rules.py` (which assembles the one VJP table): `rule(bsym, g)` returns
`[(argument, cotangent), ...]`, written in prims. A slice's cotangent is its gradient written into
zeros (`slice_update`); a gather's (`take_along_dim`) is a one-hot mask over the gathered dim,
which stays elementwise and fuses with what surrounds it (cross_entropy's softmax backward).
"""

from __future__ import annotations

from collections.abc import Callable

from compiler import prims
from compiler.core.ir import BoundSymbol, TensorProxy, same_size, size_product
from compiler.core.proxies import same_extent
from compiler.prims import Prim

Cotangents = list[tuple[TensorProxy, TensorProxy]]


def zeros(like: TensorProxy) -> TensorProxy:
    """A tensor of zeros shaped like `like`."""
    return prims.full(list(like.shape), 0.0 if like.dtype.is_floating_point else 0, like.dtype, like.device)


def zeros_shaped(like: TensorProxy, dim: int, size: int) -> TensorProxy:
    """Zeros of `like`'s shape, dtype and device, `size` long along `dim`."""
    shape = list(like.shape)
    shape[dim] = size
    return prims.full(shape, 0.0 if like.dtype.is_floating_point else 0, like.dtype, like.device)


def transpose(t: TensorProxy) -> TensorProxy:
    """`t` with its last two dims swapped."""
    perm = [*range(t.ndim - 2), t.ndim - 1, t.ndim - 2]
    return prims.permute(t, perm)


def _broadcast_in_dim(bsym: BoundSymbol, g: TensorProxy) -> Cotangents:
    a, shape, broadcast_dims = bsym.args
    # NOTE: a new dim of size 1 (an unsqueeze) needs no sum: the reshape below drops it
    summed = [d for d in range(len(shape)) if d not in broadcast_dims and not same_size(shape[d], 1)]
    summed += [d for i, d in enumerate(broadcast_dims) if same_size(a.shape[i], 1) and not same_size(shape[d], 1)]
    reduced = prims.sum(g, tuple(sorted(summed))) if summed else g
    if len(reduced.shape) == a.ndim:
        return [(a, reduced)]
    return [(a, prims.reshape(reduced, list(a.shape)))]


def _reshape(bsym: BoundSymbol, g: TensorProxy) -> Cotangents:
    a = bsym.args[0]
    return [(a, prims.reshape(g, list(a.shape)))]


def _permute(bsym: BoundSymbol, g: TensorProxy) -> Cotangents:
    a, perm = bsym.args
    return [(a, prims.permute(g, sorted(range(len(perm)), key=perm.__getitem__)))]


def _slice(bsym: BoundSymbol, g: TensorProxy) -> Cotangents:
    a, starts, ends, steps = bsym.args
    return [(a, prims.slice_update(zeros(a), g, starts, ends, steps))]


def _cat(bsym: BoundSymbol, g: TensorProxy) -> Cotangents:
    tensors, dim = bsym.args
    result, start = [], 0
    for t in tensors:
        end = t.shape[dim] if type(start) is int and start == 0 else start + t.shape[dim]
        starts = [start if d == dim else 0 for d in range(g.ndim)]
        ends = [end if d == dim else g.shape[d] for d in range(g.ndim)]
        result.append((t, sliced(g, starts, ends)))
        start = end
    return result


def _index_select(bsym: BoundSymbol, g: TensorProxy) -> Cotangents:
    a, dim, index = bsym.args
    if a.ndim == 0:
        return [(a, prims.reshape(g, []))]
    return [(a, prims.index_add(zeros(a), dim, index, g))]


def _index_copy(bsym: BoundSymbol, g: TensorProxy) -> Cotangents:
    a, dim, index, source = bsym.args
    return [(a, prims.index_copy(g, dim, index, zeros(source))), (source, prims.index_select(g, dim, index))]


def _index_add(bsym: BoundSymbol, g: TensorProxy) -> Cotangents:
    a, dim, index, source = bsym.args
    return [(a, g), (source, prims.index_select(g, dim, index))]


def _slice_update(bsym: BoundSymbol, g: TensorProxy) -> Cotangents:
    a, value, starts, ends, steps = bsym.args
    return [(a, prims.slice_update(g, zeros(value), starts, ends, steps)), (value, prims.slice(g, starts, ends, steps))]


def _take_along_dim(bsym: BoundSymbol, g: TensorProxy) -> Cotangents:
    """out[..., j, ...] = a[..., index[..., j, ...], ...] along `dim`: the cotangent is scatter-added
    (into the other terms of `a`'s gradient, `autodiff`; for nvFuser, as one-hot masks that fuse,
    `one_hot_scatters`). An index of `a`'s sizes off `dim` (equal, not the same symbolic sizes:
    a guard) is broadcast to them, so that the scatter reads as one of a few whole columns."""
    a, index, dim = bsym.args
    picks = index.shape[dim]
    if isinstance(picks, int) and picks == 0:
        return [(a, zeros(a))]  # NOTE: no picks (an empty dim): no gradient
    others = [d for d in range(a.ndim) if d != dim]
    equal = isinstance(picks, int) and all(same_size(index.shape[d], a.shape[d]) for d in others)
    if equal and not all(same_extent(index.shape[d], a.shape[d]) for d in others):
        shape = [picks if d == dim else a.shape[d] for d in range(a.ndim)]
        index, g = (prims.broadcast_in_dim(t, shape, list(range(a.ndim))) for t in (index, g))
    return [(a, prims.scatter_reduce(zeros(a), dim, index, g, "sum", True))]


def slice_index(t: TensorProxy, dim: int, j: int) -> TensorProxy:
    """`t` at index `j` of `dim`, that dim removed."""
    starts = [j if d == dim else 0 for d in range(t.ndim)]
    ends = [j + 1 if d == dim else t.shape[d] for d in range(t.ndim)]
    return prims.squeeze(sliced(t, starts, ends), [dim])


def sliced(t: TensorProxy, starts: list, ends: list) -> TensorProxy:
    """`t[starts:ends]` (unit steps); `t` itself where that is all of it (one gathered column of a
    single-column index, a cat of one tensor): a slice, even of everything, makes nvFuser schedule
    its fusion for resizing."""
    whole = all(e is n or (type(e) is int and type(n) is int and e == n) for e, n in zip(ends, t.shape))
    if whole and all(type(s) is int and s == 0 for s in starts):
        return t
    return prims.slice(t, starts, ends, [1] * t.ndim)


def _matmul(bsym: BoundSymbol, g: TensorProxy) -> Cotangents:
    a, b = bsym.args
    return [(a, prims.matmul(g, transpose(b))), (b, prims.matmul(transpose(a), g))]


def _linear(bsym: BoundSymbol, g: TensorProxy) -> Cotangents:
    """out = a @ w.T + bias over the leading dims of `a`, flattened to rows for the two matmuls."""
    a, w, bias = bsym.args
    rows = size_product(a.shape[:-1])
    g2 = prims.reshape(g, [rows, w.shape[0]])
    a2 = prims.reshape(a, [rows, w.shape[1]])
    result = [(a, prims.reshape(prims.matmul(g2, w), list(a.shape))), (w, prims.matmul(transpose(g2), a2))]
    if bias is not None:
        result.append((bias, prims.sum(g2, (0,))))
    return result


def _cumsum(bsym: BoundSymbol, g: TensorProxy) -> Cotangents:
    """Each element reaches the running sums after it: the gradient runs the other way."""
    a, dim, reverse = bsym.args
    return [(a, prims.cumsum(g, dim, not reverse))]


def _updated_without_grad(bsym: BoundSymbol, g: TensorProxy) -> Cotangents:
    """The tensor's new contents keep its old ones' history: the gradient goes to those."""
    return [(bsym.args[1], g)]


def _overwritten(bsym: BoundSymbol, g: TensorProxy) -> Cotangents:
    """The new contents take the gradient; the old ones none (autodiff gives them zeros)."""
    return [(bsym.args[0], g)]


STRUCTURAL_RULES: dict[Prim, Callable[[BoundSymbol, TensorProxy], Cotangents]] = {
    Prim.UPDATED_WITHOUT_GRAD: _updated_without_grad,
    Prim.OVERWRITTEN: _overwritten,
    Prim.BROADCAST_IN_DIM: _broadcast_in_dim,
    Prim.RESHAPE: _reshape,
    Prim.PERMUTE: _permute,
    Prim.SLICE: _slice,
    Prim.SQUEEZE: _reshape,
    Prim.CAT: _cat,
    Prim.INDEX_SELECT: _index_select,
    Prim.INDEX_COPY: _index_copy,
    Prim.INDEX_ADD: _index_add,
    Prim.SLICE_UPDATE: _slice_update,
    Prim.TAKE_ALONG_DIM: _take_along_dim,
    Prim.CUMSUM: _cumsum,
    Prim.MATMUL: _matmul,
    Prim.LINEAR: _linear,
}
