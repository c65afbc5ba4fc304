"""pdist and block_diag (compiler/ops/matrix_compositions.py) against eager: every p (zero distances'
gradient included), strided and single-row inputs, float32 and bfloat16 block_diag with mixed dtypes."""

from __future__ import annotations

import math

import pytest
import torch

import compiler
from tests.support.eager_match import assert_matches_eager


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("p", [2.0, 1.0, 0.0, 3.0, 0.5, math.inf], ids=str)
def test_pdist_matches_eager_with_equal_rows(p: float, seed: int) -> None:
    x = torch.randn(5, 3, generator=torch.Generator().manual_seed(seed))
    x[3] = x[1]
    assert_matches_eager(lambda x: torch.pdist(x, p), x, grad=p != 0, seed=seed)
    assert_matches_eager(lambda x: torch.nn.functional.pdist(x.mT.contiguous().mT[:, :2], p), x, grad=p != 0)


def test_pdist_of_one_row_is_empty() -> None:
    assert_matches_eager(lambda x: torch.pdist(x[:1]), torch.randn(3, 2))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_block_diag_matches_eager(dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(0)
    a, b, c = (
        (torch.randn(2, 3, generator=g) * 3).to(dtype),
        (torch.randn(4, generator=g) * 3).to(dtype),
        torch.tensor(3.0).to(dtype),
    )
    assert_matches_eager(torch.block_diag, a, b, c)
    assert_matches_eager(lambda a, b, c: torch.block_diag(a.mT, b[:2].int(), a[:0]), a, b, c)


def test_block_diag_promotes_mixed_dtypes() -> None:
    args = torch.randint(0, 4, (2, 2)), torch.randn(1, 2).bfloat16()
    got, want = compiler.jit(torch.block_diag)(*args), torch.block_diag(*args)
    assert got.dtype == want.dtype and torch.equal(got, want)
