"""`torch.linalg.solve_triangular`: X with A X = B (left) or X A = B, A triangular.

Written as substitution, one row of X at a time (LAPACK's order): for a lower A, row i is
(B_i - A[i, :i] X[:i]) / A[i, i], from the first row down; for an upper A, from the last row up;
`unitriangular` takes the diagonal as ones (no division). `left=False` solves the transposed system
(X A = B is A^T X^T = B^T). Each step is a matrix product and an elementwise update, so autodiff
gives the solve's gradient, and the trace grows with A's size (transformers' gated delta rule,
Qwen3-Next's and OLMo-Hybrid's linear attention, solves chunks of 64). Batch dims broadcast as
torch's; A's size is specialised (guarded) to its value: the steps depend on it.
"""

from __future__ import annotations

from typing import Any

from compiler import prims
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy
from compiler.ops.aliasing import fresh_copy
from compiler.ops.elementwise import div, sub
from compiler.ops.linalg import matmul
from compiler.ops.operands import broadcast_shapes, broadcast_to, check_no_out
from compiler.ops.registry import register
from compiler.ops.shape import cat, transpose


def _rows(x: TensorProxy, start: int, stop: int) -> TensorProxy:
    """x[..., start:stop, :]."""
    starts, ends = [0] * x.ndim, list(x.shape)
    starts[-2], ends[-2] = start, stop
    return prims.slice(x, starts, ends, [1] * x.ndim)


def _block(x: TensorProxy, rows: tuple[int, int], columns: tuple[int, int]) -> TensorProxy:
    """x[..., rows[0]:rows[1], columns[0]:columns[1]]."""
    starts, ends = [0] * x.ndim, list(x.shape)
    (starts[-2], ends[-2]), (starts[-1], ends[-1]) = rows, columns
    return prims.slice(x, starts, ends, [1] * x.ndim)


def _substitute(a: TensorProxy, b: TensorProxy, upper: bool, unitriangular: bool) -> TensorProxy:
    batch = tuple(broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2])))
    a, b = broadcast_to(a, (*batch, *a.shape[-2:])), broadcast_to(b, (*batch, *b.shape[-2:]))
    n = int(a.shape[-1])
    if n == 0:
        return fresh_copy(b)  # an empty system: its empty solution
    order = range(n - 1, -1, -1) if upper else range(n)
    solved: Any = None  # the rows of X found so far, in their order in X
    for i in order:
        row = _rows(b, i, i + 1)
        if solved is not None:
            known = (i + 1, n) if upper else (0, i)
            row = sub(row, matmul(_block(a, (i, i + 1), known), solved))
        if not unitriangular:
            row = div(row, _block(a, (i, i + 1), (i, i + 1)))
        solved = row if solved is None else cat([row, solved] if upper else [solved, row], -2)
    return solved


@register("torch.linalg.solve_triangular")
def solve_triangular(
    A: TensorProxy, B: TensorProxy, *, upper: bool, left: bool = True, unitriangular: bool = False, out: Any = None
) -> Any:
    check_no_out("torch.linalg.solve_triangular", out)
    check(
        isinstance(A, TensorProxy) and isinstance(B, TensorProxy) and A.ndim >= 2 and B.ndim >= 2,
        lambda: f"torch.linalg.solve_triangular: A and B must be tensors of at least 2 dims{called_at()}",
        RuntimeError,
    )
    check(
        A.dtype == B.dtype and A.dtype.is_floating_point,
        lambda: (
            f"torch.linalg.solve_triangular: A and B must have one floating dtype, got {A.dtype} and "
            f"{B.dtype}{called_at()}"
        ),
        RuntimeError,
    )
    # NOTE: the steps depend on A's size: a symbolic size is specialised (guarded) to its value
    n = int(A.shape[-1])
    solved_dim = -2 if left else -1
    check(
        int(A.shape[-2]) == n and int(B.shape[solved_dim]) == n,
        lambda: (
            f"torch.linalg.solve_triangular: A must be square and match B along dim {solved_dim}, got A "
            f"{tuple(A.shape)} and B {tuple(B.shape)}{called_at()}"
        ),
        RuntimeError,
    )
    if left:
        return _substitute(A, B, upper, unitriangular)
    transposed = _substitute(transpose(A, -2, -1), transpose(B, -2, -1), not upper, unitriangular)
    return transpose(transposed, -2, -1)
