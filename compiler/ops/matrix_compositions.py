"""Matrix-building and contracting ops written with other ops: diag, diag_embed, trace, tensordot,
kron, block_diag, cdist and pdist.

diag_embed compares a row and a column iota (`column - row == offset`) and selects the values
broadcast along the dim their index runs over, so its gradient is the select's and no shape
depends on values; `diag` of a vector is the 2-d case, `diag` of a matrix a copy of `diagonal`.
tensordot moves the contracted dims together and runs one matmul, as torch does. cdist follows
eager's choice between the difference form and the matmul form of the euclidean distance
(`compute_mode`), so the two round alike; a distance of zero has a zero gradient, as eager's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from compiler import prims
from compiler.core import dtypes
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy, same_size, size_product
from compiler.ops.aliasing import fresh_copy
from compiler.ops.index_combinations import triangle_indices
from compiler.ops.linalg import matmul
from compiler.ops.operands import broadcast_shapes, broadcast_to, canonical_dim, check_no_out, elementwise, to_dtype
from compiler.ops.reductions import amax
from compiler.ops.reductions import sum as sum_op
from compiler.ops.registry import register
from compiler.ops.shape import permute, reshape
from compiler.ops.shape_compositions import diagonal as diagonal_of


def _check_tensor(op: str, input: Any, ndims: Sequence[int] | None = None) -> None:
    check(
        isinstance(input, TensorProxy),
        lambda: f"{op}: expected a tensor, got {type(input).__name__} {input!r}{called_at()}",
        TypeError,
    )
    check(
        ndims is None or input.ndim in ndims,
        lambda: f"{op}: expected a {' or '.join(f'{n}-d' for n in ndims)} tensor, got {input.ndim}-d{called_at()}",
        RuntimeError,
    )


@register("torch.diag_embed", "torch.Tensor.diag_embed")
def diag_embed(input: TensorProxy, offset: int = 0, dim1: int = -2, dim2: int = -1) -> TensorProxy:
    """The last dim of `input` on the diagonal `offset` of two new dims (dim1, dim2) of size
    n + |offset|, zeros elsewhere."""
    _check_tensor("torch.diag_embed", input)
    source = prims.reshape(input, [1]) if input.ndim == 0 else input
    ndim = source.ndim + 1
    d1, d2 = canonical_dim(dim1, ndim), canonical_dim(dim2, ndim)
    check(
        d1 != d2, lambda: f"diag_embed: dim1 and dim2 cannot be equal, got {dim1} and {dim2}{called_at()}", ValueError
    )
    n = source.shape[-1]
    size = n + abs(offset)
    batch = list(source.shape[:-1])
    if offset:  # NOTE: the values padded with zeros to the new dims' size, along the dim they run over
        zeros = prims.full([*batch, abs(offset)], 0, source.dtype, source.device)
        source = prims.cat([source, zeros], source.ndim - 1)
    grid = [*batch, size, size]
    row = prims.broadcast_in_dim(prims.iota(size, 0, 1, torch.int64, source.device), grid, [ndim - 2])
    column = prims.broadcast_in_dim(prims.iota(size, 0, 1, torch.int64, source.device), grid, [ndim - 1])
    on_diagonal = prims.eq(prims.sub(column, row), offset)
    along = ndim - 2 if offset >= 0 else ndim - 1  # row i holds value i above the diagonal, column j below
    values = prims.broadcast_in_dim(source, grid, [*range(len(batch)), along])
    embedded = prims.where(on_diagonal, values, prims.full(grid, 0, source.dtype, source.device))
    others = iter(range(len(batch)))
    order = [ndim - 2 if d == d1 else ndim - 1 if d == d2 else next(others) for d in range(ndim)]
    return permute(embedded, order)


@register("torch.diag", "torch.Tensor.diag")
def diag(input: TensorProxy, diagonal: int = 0, *, out: Any = None) -> TensorProxy:
    """A vector on the diagonal `diagonal` (an offset) of a square matrix, or a matrix's diagonal as a
    new vector (a copy, as eager's)."""
    check_no_out("torch.diag", out)
    _check_tensor("torch.diag", input, (1, 2))
    if input.ndim == 1:
        return diag_embed(input, diagonal, 0, 1)
    return fresh_copy(diagonal_of(input, diagonal))


@register("torch.trace", "torch.Tensor.trace")
def trace(input: TensorProxy) -> TensorProxy:
    """The sum of a matrix's diagonal (integers in int64, as torch.sum)."""
    _check_tensor("torch.trace", input, (2,))
    check(input.dtype != torch.bool, lambda: f'"trace" is not implemented for bool{called_at()}', RuntimeError)
    return sum_op(diagonal_of(input))


def _tensordot_dims(a: TensorProxy, b: TensorProxy, dims: Any) -> tuple[list[int], list[int]]:
    if isinstance(dims, TensorProxy):
        check(False, lambda: f"torch.tensordot: dims as a tensor is not supported{called_at()}", NotImplementedError)
    if isinstance(dims, int):
        check(dims >= 0, lambda: f"torch.tensordot: dims must be >= 0, got {dims}{called_at()}", RuntimeError)
        check(
            dims <= min(a.ndim, b.ndim),
            lambda: f"torch.tensordot: dims={dims} exceeds the operands' {a.ndim} and {b.ndim} dims{called_at()}",
            RuntimeError,
        )
        return list(range(a.ndim - dims, a.ndim)), list(range(dims))
    check(
        isinstance(dims, (list, tuple)) and len(dims) == 2,
        lambda: f"torch.tensordot: dims must be an int or two lists of dims, got {dims!r}{called_at()}",
        RuntimeError,
    )
    dims_a, dims_b = ([d] if isinstance(d, int) else list(d) for d in dims)
    check(
        len(dims_a) == len(dims_b),
        lambda: f"torch.tensordot: both dim lists must have the same length, got {dims_a} and {dims_b}{called_at()}",
        RuntimeError,
    )
    return [canonical_dim(d, a.ndim) for d in dims_a], [canonical_dim(d, b.ndim) for d in dims_b]


@register("torch.tensordot")
def tensordot(a: TensorProxy, b: TensorProxy, dims: Any = 2, out: Any = None) -> TensorProxy:
    """The sum over the dims `dims` pairs (an int n: a's last n with b's first n), one matmul of
    a's free dims by b's."""
    check_no_out("torch.tensordot", out)
    _check_tensor("torch.tensordot", a)
    _check_tensor("torch.tensordot", b)
    check(
        a.dtype == b.dtype,
        lambda: f"torch.tensordot: both inputs should have the same dtype, got {a.dtype} and {b.dtype}{called_at()}",
        RuntimeError,
    )
    dims_a, dims_b = _tensordot_dims(a, b, dims)
    for da, db in zip(dims_a, dims_b):
        # NOTE: a contracted dim of size 1 broadcasts against the other's: that one is summed first, as in eager
        if same_size(b.shape[db], 1):
            a = sum_op(a, da, True, dtype=a.dtype)
        elif same_size(a.shape[da], 1):
            b = sum_op(b, db, True, dtype=b.dtype)
        check(
            same_size(a.shape[da], b.shape[db]),
            lambda a=a, b=b, da=da, db=db: (
                f"torch.tensordot: contracted dims differ in size: a's dim {da} is {a.shape[da]}, b's dim {db} is "
                f"{b.shape[db]}{called_at()}"
            ),
            RuntimeError,
        )
    free_a = [d for d in range(a.ndim) if d not in dims_a]
    free_b = [d for d in range(b.ndim) if d not in dims_b]
    contracted = size_product([a.shape[d] for d in dims_a])
    left = reshape(permute(a, [*free_a, *dims_a]), [size_product([a.shape[d] for d in free_a]), contracted])
    right = reshape(permute(b, [*dims_b, *free_b]), [contracted, size_product([b.shape[d] for d in free_b])])
    return reshape(matmul(left, right), [*(a.shape[d] for d in free_a), *(b.shape[d] for d in free_b)])


@register("torch.kron", "torch.Tensor.kron")
def kron(input: TensorProxy, other: TensorProxy, *, out: Any = None) -> TensorProxy:
    """The Kronecker product: dims paired from the right, each of size input's * other's."""
    check_no_out("torch.kron", out)
    _check_tensor("torch.kron", input)
    _check_tensor("torch.kron", other)
    ndim = max(input.ndim, other.ndim)
    a_shape = [1] * (ndim - input.ndim) + list(input.shape)
    b_shape = [1] * (ndim - other.ndim) + list(other.shape)
    # NOTE: a's dims interleaved with ones, b's placed in those ones: a product over [a0, b0, a1, b1, ...]
    a = reshape(input, [s for size in a_shape for s in (size, 1)])
    b = reshape(other, [s for size in b_shape for s in (1, size)])
    return reshape(elementwise(prims.mul, a, b), [x * y for x, y in zip(a_shape, b_shape)])


def _safe_root(total: TensorProxy, root: Any) -> TensorProxy:
    """total ** root with a zero gradient where total is 0 (eager's cdist backward gives 0 there)."""
    zero = prims.eq(total, 0.0)
    safe = prims.where(zero, prims.full(list(total.shape), 1.0, total.dtype, total.device), total)
    rooted = prims.sqrt(safe) if root == 0.5 else prims.pow(safe, root)
    return prims.where(zero, prims.full(list(total.shape), 0.0, total.dtype, total.device), rooted)


def _euclidean_by_matmul(x1: TensorProxy, x2: TensorProxy) -> TensorProxy:
    """Eager's matmul form: |a|^2 - 2 a.b + |b|^2 as one matmul of padded operands, clamped at
    1e-30 before the square root."""
    x1_norm = sum_op(elementwise(prims.mul, x1, x1), -1, True)
    x2_norm = sum_op(elementwise(prims.mul, x2, x2), -1, True)
    x1_ones = prims.full(list(x1_norm.shape), 1.0, x1.dtype, x1.device)
    x2_ones = prims.full(list(x2_norm.shape), 1.0, x2.dtype, x2.device)
    left = prims.cat([prims.mul(x1, -2.0), x1_norm, x1_ones], x1.ndim - 1)
    right = prims.cat([x2, x2_ones, x2_norm], x2.ndim - 1)
    squared = matmul(left, prims.permute(right, [*range(right.ndim - 2), right.ndim - 1, right.ndim - 2]))
    return prims.sqrt(prims.maximum(squared, 1e-30))


def _uses_matmul(p: float, rows: Any, columns: Any, compute_mode: str | None) -> bool:
    if p != 2:
        return False
    if compute_mode in (None, "use_mm_for_euclid_dist_if_necessary"):
        return int(rows) > 25 or int(columns) > 25
    check(
        compute_mode in ("use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"),
        lambda: f"torch.cdist: {compute_mode!r} is not a valid compute_mode{called_at()}",
        ValueError,
    )
    return compute_mode == "use_mm_for_euclid_dist"


@register("torch.cdist")
def cdist(x1: TensorProxy, x2: TensorProxy, p: float = 2.0, compute_mode: str | None = None) -> TensorProxy:
    """The p-norm distance between each row of x1 [..., P, M] and each row of x2 [..., R, M]:
    [..., P, R], batch dims broadcast; p = 0 counts the differing coordinates, p = inf takes the
    largest difference."""
    for name, x in (("x1", x1), ("x2", x2)):
        _check_tensor("torch.cdist", x)
        check(
            x.ndim >= 2 and dtypes.is_float(x.dtype) and x.dtype != torch.bfloat16,
            lambda name=name, x=x: (
                f"torch.cdist: {name} must be a float32/float64/float16 tensor of at least 2 dims, got {x.ndim}-d "
                f"{x.dtype}{called_at()}"
            ),
            RuntimeError,
        )
    check(
        x1.dtype == x2.dtype,
        lambda: f"torch.cdist: x1 and x2 must have the same dtype, got {x1.dtype} and {x2.dtype}{called_at()}",
        RuntimeError,
    )
    check(isinstance(p, (int, float)) and p >= 0, lambda: f"torch.cdist: p must be >= 0, got {p!r}{called_at()}")
    check(
        same_size(x1.shape[-1], x2.shape[-1]),
        lambda: (
            f"torch.cdist: x1 and x2 must have the same number of columns, got {x1.shape[-1]} and "
            f"{x2.shape[-1]}{called_at()}"
        ),
        RuntimeError,
    )
    batch = list(broadcast_shapes(x1.shape[:-2], x2.shape[:-2]))
    rows, columns, width = x1.shape[-2], x2.shape[-2], x1.shape[-1]
    a = broadcast_to(x1, [*batch, rows, width])
    b = broadcast_to(x2, [*batch, columns, width])
    if _uses_matmul(p, rows, columns, compute_mode):
        return _euclidean_by_matmul(a, b)
    grid = [*batch, rows, columns, width]
    keep = list(range(len(batch)))
    difference = prims.sub(
        prims.broadcast_in_dim(a, grid, [*keep, len(batch), len(batch) + 2]),
        prims.broadcast_in_dim(b, grid, [*keep, len(batch) + 1, len(batch) + 2]),
    )
    if p == 0:
        return sum_op(to_dtype(prims.ne(difference, 0.0), x1.dtype), -1)
    magnitude = prims.abs(difference)
    if p == 1:
        return sum_op(magnitude, -1)
    if math.isinf(p):
        return amax(magnitude, -1)
    if p == 2:
        return _safe_root(sum_op(prims.mul(difference, difference), -1), 0.5)
    powered = _safe_root(magnitude, float(p)) if p < 1 else prims.pow(magnitude, float(p))
    return _safe_root(sum_op(powered, -1), 1.0 / p)


@register("torch.pdist")
def pdist(input: TensorProxy, p: float = 2.0) -> TensorProxy:
    """The p-norm distance between each pair of rows i < j of a [N, M] input, in row-major order of
    the pairs (the upper triangle of cdist(input, input)); a zero distance has a zero gradient."""
    _check_tensor("torch.pdist", input, (2,))
    check(
        dtypes.is_float(input.dtype),
        lambda: f"torch.pdist: only supports floating-point dtypes, got {input.dtype}{called_at()}",
        RuntimeError,
    )
    check(
        isinstance(p, (int, float)) and p >= 0, lambda: f"torch.pdist: only supports non-negative p values{called_at()}"
    )
    rows = int(input.shape[0])
    first, second = triangle_indices(rows, rows, 1, True, input.device)
    return torch.linalg.vector_norm(input[first] - input[second], p, dim=-1)


@register("torch.block_diag")
def block_diag(*tensors: TensorProxy) -> TensorProxy:
    """The tensors (0-d as 1 x 1, 1-d as one row, 2-d) laid along the diagonal of a zero matrix, in
    their promoted dtype."""
    for t in tensors:
        _check_tensor("torch.block_diag", t, (0, 1, 2))
    blocks = [t.reshape(1, -1) if t.ndim < 2 else t for t in tensors]
    if not blocks:
        return prims.full([1, 0], 0.0, torch.get_default_dtype(), torch.device("cpu"))
    dtype = blocks[0].dtype
    for b in blocks[1:]:
        dtype = torch.promote_types(dtype, b.dtype)
    widths = [int(b.shape[1]) for b in blocks]
    total, placed = sum(widths), 0
    rows = []
    for block, width in zip(blocks, widths):
        rows.append(torch.nn.functional.pad(block.to(dtype), (placed, total - placed - width)))
        placed += width
    return torch.cat(rows, 0)
