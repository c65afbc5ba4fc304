"""tril_indices / triu_indices and cartesian_prod (compiler/ops/index_combinations.py) against eager:
every offset through square, wide, tall and empty matrices, the dtype argument, and the products'
dtypes and single-tensor form."""

from __future__ import annotations

import pytest
import torch

import compiler


@pytest.mark.parametrize("op", [torch.tril_indices, torch.triu_indices])
@pytest.mark.parametrize(("rows", "cols"), [(4, 4), (3, 5), (5, 2), (1, 1), (0, 3), (3, 0)])
def test_triangle_indices_match_eager_at_every_offset(op, rows: int, cols: int) -> None:
    offsets = [-6, -2, -1, 0, 1, 2, 6]
    got = compiler.jit(lambda: [op(rows, cols, offset) for offset in offsets])()
    for offset, g in zip(offsets, got):
        want = op(rows, cols, offset)
        assert g.dtype == want.dtype and torch.equal(g, want), (offset, g, want)


def test_triangle_indices_take_a_dtype_and_refuse_others() -> None:
    got = compiler.jit(lambda: torch.triu_indices(3, 4, 1, dtype=torch.int32))()
    assert got.dtype == torch.int32 and torch.equal(got, torch.triu_indices(3, 4, 1, dtype=torch.int32))
    with pytest.raises(RuntimeError, match=r"dtype must be torch\.int32 or torch\.int64"):
        compiler.jit(lambda: torch.tril_indices(3, 3, dtype=torch.float32))()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_cartesian_prod_matches_eager(dtype: torch.dtype) -> None:
    a, b, c = torch.arange(3).to(dtype), torch.arange(4, 8, 2).to(dtype), torch.tensor([9]).to(dtype)
    for fn in (
        torch.cartesian_prod,
        lambda a, b, c: torch.cartesian_prod(a, b.flip(0)),
        lambda a, b, c: torch.cartesian_prod(a),
    ):
        got, want = compiler.jit(fn)(a, b, c), fn(a, b, c)
        assert got.dtype == want.dtype and torch.equal(got, want)


def test_cartesian_prod_gradients_match_eager() -> None:
    a, b = torch.randn(3, requires_grad=True), torch.randn(2, requires_grad=True)
    got, want = compiler.jit(torch.cartesian_prod)(a, b), torch.cartesian_prod(a, b)
    torch.testing.assert_close(got, want)
    cotangent = torch.randn_like(want)
    for g, w in zip(torch.autograd.grad(got, [a, b], cotangent), torch.autograd.grad(want, [a, b], cotangent)):
        torch.testing.assert_close(g, w)
