"""linalg.matrix_norm and renorm (compiler/ops/norms.py) against eager: every supported ord over
default and chosen dims, keepdim and dtype=, float32 and bfloat16, gradients; the refused ords."""

from __future__ import annotations

import math

import pytest
import torch

import compiler
from tests.support.eager_match import assert_matches_eager

ORDS = ["fro", 1, -1, math.inf, -math.inf]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("ord", ORDS, ids=str)
def test_matrix_norm_matches_eager(ord, seed: int, dtype: torch.dtype) -> None:
    x = torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(seed)).to(dtype)
    bf16 = {"reference": torch.float32} if dtype == torch.bfloat16 else {}
    assert_matches_eager(lambda x: torch.linalg.matrix_norm(x, ord), x, seed=seed, **bf16)
    assert_matches_eager(lambda x: torch.linalg.matrix_norm(x.mT, ord, dim=(0, 2), keepdim=True), x, **bf16)
    assert_matches_eager(lambda x: torch.linalg.matrix_norm(x[:1, :1], ord, dtype=torch.float32), x, **bf16)


@pytest.mark.parametrize("ord", ["nuc", 2, -2])
def test_matrix_norm_refuses_the_singular_value_norms_naming_the_ord(ord) -> None:
    with pytest.raises(NotImplementedError, match=f"matrix_norm: ord={ord!r} is not supported"):
        compiler.jit(lambda x: torch.linalg.matrix_norm(x, ord))(torch.randn(3, 3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("p", [1, 2, 3.5, math.inf], ids=str)
def test_renorm_matches_eager(p: float, seed: int, dtype: torch.dtype) -> None:
    x = torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(seed)).to(dtype)
    bf16 = {"reference": torch.float32} if dtype == torch.bfloat16 else {}
    assert_matches_eager(lambda x: torch.renorm(x, p, 1, 2.0) + x.mT.renorm(p, 0, 1.5).mT, x, seed=seed, **bf16)
    assert_matches_eager(lambda x: x[0].renorm(p, -1, 100.0), x, **bf16)  # no slice over maxnorm


def test_renorm_in_place_and_errors() -> None:
    x = torch.randn(3, 4)
    y = x.clone()
    compiler.jit(lambda y: y.renorm_(2, 0, 1.0))(y)
    torch.testing.assert_close(y, x.renorm(2, 0, 1.0))
    with pytest.raises(RuntimeError, match="renorm: input needs at least 2 dimensions"):
        compiler.jit(lambda x: x.renorm(2, 0, 1.0))(torch.randn(3))
