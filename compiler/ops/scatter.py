"""Scatters along a dim: torch.scatter (a tensor or a number), scatter_add and scatter_reduce, and
index_reduce (a scatter_reduce of whole slices).

Each is one prim that torch runs (`prims.scatter`, `prims.scatter_reduce`). nvFuser leaves both to
torch. Eager's checks are kept: the index must be int64 or int32 (converted to int64) and have
self's rank (a 0-d tensor counts as 1-D), src must have self's rank and dtype, and the index may be
no larger than src in any dim, nor larger than self in any dim but `dim`. torch reads src only
where the index has elements, so src is cut to the index's shape first: the prims take an index
and a src of one shape, and src's gradient is zero elsewhere. An empty index gives a copy of self,
as in eager, which skips its shape checks then. The `reduce=` of `scatter` ("add", "multiply") is
scatter_reduce's "sum" / "prod" with include_self. In-place forms (`scatter_`, ...) are in
`inplace.py`. Where the index repeats a position, plain scatter keeps one of the writes; which one is
up to torch's kernel (nondeterministic on CUDA, as in eager).
"""

from __future__ import annotations

from typing import Any

import torch

from compiler import prims
from compiler.core.errors import called_at, check
from compiler.core.ir import NumberProxy, TensorProxy, same_size
from compiler.ops.aliasing import fresh_copy
from compiler.ops.operands import canonical_dim, to_dtype
from compiler.ops.registry import register
from compiler.prims.prim import SCATTER_REDUCTIONS

_LEGACY_REDUCE = {"add": "sum", "multiply": "prod"}
_REDUCE_ALIASES = {"max": "amax", "min": "amin"}  # eager's scatter_reduce accepts these too


def _as_1d(t: TensorProxy) -> TensorProxy:
    return prims.reshape(t, [1]) if t.ndim == 0 else t


def _check_operands(op: str, input: Any, index: Any, src: Any) -> None:
    check(
        isinstance(input, TensorProxy),
        lambda: f"{op}: expected self to be a tensor, got {type(input).__name__}{called_at()}",
        TypeError,
    )
    check(
        isinstance(index, TensorProxy) and index.dtype in (torch.int64, torch.int32),
        lambda: f"{op}: expected an int64 (or int32) index tensor, got {getattr(index, 'dtype', index)!r}{called_at()}",
        TypeError,
    )
    check(
        isinstance(src, TensorProxy) and src.dtype == input.dtype,
        lambda: (
            f"{op}: expected src to be a tensor of self's dtype {input.dtype}, got "
            f"{getattr(src, 'dtype', type(src).__name__)}{called_at()}"
        ),
        TypeError,
    )


def _empty(index: TensorProxy) -> bool:
    return any(type(s) is int and s == 0 for s in index.shape)


def _check_shapes(op: str, input: TensorProxy, d: int, index: TensorProxy, src: TensorProxy) -> None:
    rank = max(input.ndim, 1)
    check(
        max(index.ndim, 1) == rank and max(src.ndim, 1) == rank,
        lambda: (
            f"{op}: index (rank {index.ndim}) and src (rank {src.ndim}) must have self's number of dims "
            f"({input.ndim}){called_at()}"
        ),
        ValueError,
    )
    shapes = [list(_as_shape(t)) for t in (input, index, src)]
    for k in range(rank):
        check(
            bool(shapes[1][k] <= shapes[2][k]) and (k == d or bool(shapes[1][k] <= shapes[0][k])),
            lambda: (
                f"{op}: expected index {tuple(index.shape)} to be no larger than self {tuple(input.shape)} apart "
                f"from dimension {d}, and no larger than src {tuple(src.shape)}{called_at()}"
            ),
            ValueError,
        )


def _as_shape(t: TensorProxy) -> tuple:
    return tuple(t.shape) if t.ndim else (1,)


def _scatter(op: str, input: Any, dim: Any, index: Any, src: Any, mode: tuple | None) -> TensorProxy:
    """The checked scatter of `src` (a tensor, or a number filling the index's shape) into a copy
    of `input`: `prims.scatter` when `mode` is None, else `prims.scatter_reduce(..., *mode)`."""
    if isinstance(input, TensorProxy) and not isinstance(src, TensorProxy):
        check(
            isinstance(src, (int, float, bool, NumberProxy)),
            lambda: f"{op}: expected src to be a tensor or a number, got {type(src).__name__}{called_at()}",
            TypeError,
        )
        if isinstance(index, TensorProxy):
            src = prims.full(list(index.shape), to_dtype(src, input.dtype), input.dtype, input.device)
    _check_operands(op, input, index, src)
    d = canonical_dim(dim, input.ndim)
    if _empty(index):
        return fresh_copy(input)
    _check_shapes(op, input, d, index, src)
    a, i, s = _as_1d(input), to_dtype(_as_1d(index), torch.int64), _as_1d(src)
    if not all(map(same_size, s.shape, i.shape)):
        s = prims.slice(s, [0] * s.ndim, list(i.shape), [1] * s.ndim)
    out = prims.scatter(a, d, i, s) if mode is None else prims.scatter_reduce(a, d, i, s, *mode)
    return prims.reshape(out, []) if input.ndim == 0 else out


@register("torch.scatter", "torch.Tensor.scatter")
def scatter(
    input: TensorProxy, dim: int, index: TensorProxy, src: Any = None, *, value: Any = None, reduce: str | None = None
) -> TensorProxy:
    """torch.scatter: `src` (a tensor, or the number `value`) written into a copy of `input` at the
    positions `index` gives along `dim`; reduce="add" / "multiply" accumulates instead."""
    check(
        (src is None) != (value is None),
        lambda: f"torch.scatter: expected exactly one of src and value{called_at()}",
        TypeError,
    )
    check(
        reduce is None or reduce in _LEGACY_REDUCE,
        lambda: f"torch.scatter: reduce must be 'add' or 'multiply', got {reduce!r}{called_at()}",
        ValueError,
    )
    mode = None if reduce is None else (_LEGACY_REDUCE[reduce], True)
    return _scatter("scatter", input, dim, index, value if src is None else src, mode)


@register("torch.scatter_add", "torch.Tensor.scatter_add")
def scatter_add(input: TensorProxy, dim: int, index: TensorProxy, src: TensorProxy) -> TensorProxy:
    """torch.scatter_add: a copy of `input` with each element of `src` added at its `index` along `dim`."""
    check(
        isinstance(src, TensorProxy),
        lambda: f"scatter_add: expected src to be a tensor, got {type(src).__name__}{called_at()}",
        TypeError,
    )
    return _scatter("scatter_add", input, dim, index, src, ("sum", True))


@register("torch.scatter_reduce", "torch.Tensor.scatter_reduce")
def scatter_reduce(
    input: TensorProxy, dim: int, index: TensorProxy, src: TensorProxy, reduce: str, *, include_self: bool = True
) -> TensorProxy:
    """torch.scatter_reduce: each position of a copy of `input` reduced (`reduce`: sum, prod, mean,
    amax, amin) with the elements of `src` that `index` sends there, and with itself when
    `include_self`."""
    reduce = _REDUCE_ALIASES.get(reduce, reduce) if isinstance(reduce, str) else reduce
    check(
        reduce in SCATTER_REDUCTIONS,
        lambda: f"scatter_reduce: reduce must be one of {', '.join(SCATTER_REDUCTIONS)}, got {reduce!r}{called_at()}",
        ValueError,
    )
    check(
        isinstance(src, TensorProxy),
        lambda: f"scatter_reduce: expected src to be a tensor, got {type(src).__name__}{called_at()}",
        TypeError,
    )
    return _scatter("scatter_reduce", input, dim, index, src, (reduce, bool(include_self)))


@register("torch.index_reduce", "torch.Tensor.index_reduce")
def index_reduce(
    input: TensorProxy, dim: int, index: TensorProxy, source: TensorProxy, reduce: str, *, include_self: bool = True
) -> TensorProxy:
    """torch.index_reduce: the slices of a copy of `input` at `index` along `dim` reduced ("prod",
    "mean", "amax", "amin") with the slices of `source`, and with themselves when `include_self`:
    scatter_reduce with the index broadcast along `source`'s other dims."""
    check(
        reduce in ("prod", "mean", "amax", "amin"),
        lambda: f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.{called_at()}",
        RuntimeError,
    )
    check(
        isinstance(index, TensorProxy) and index.ndim <= 1 and isinstance(source, TensorProxy),
        lambda: f"index_reduce(): Index is supposed to be a vector, got {index!r}{called_at()}",
        RuntimeError,
    )
    d = canonical_dim(dim, input.ndim)
    spread = index.reshape([-1 if i == d else 1 for i in range(source.ndim)]).expand(source.shape)
    return scatter_reduce(input, d, spread, source, reduce, include_self=include_self)
