"""linalg.cross / torch.cross and bilinear (compiler/ops/linalg.py) against eager: broadcasting, the
dim argument and torch.cross's default dim, integer inputs, float32 and bfloat16, gradients; nn.Bilinear."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

import compiler
from tests.support.eager_match import assert_matches_eager

CROSSES = {
    "linalg.cross": lambda a, b: torch.linalg.cross(a, b),
    "linalg.cross dim 0": lambda a, b: torch.linalg.cross(a.mT, b.mT, dim=0),
    "cross dim": lambda a, b: torch.cross(a, b.expand(4, 3), dim=1) + a.cross(b.expand(4, 3), -1),
    "cross default dim": lambda a, b: torch.cross(a[:3], b.expand(3, 3)),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", sorted(CROSSES))
@pytest.mark.filterwarnings("ignore:Using torch.cross without specifying the dim arg")
def test_cross_matches_eager(name: str, seed: int, dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randn(4, 3, generator=g) * 4, torch.randn(1, 3, generator=g) * 4
    # NOTE: bf16 within a few steps: a gradient component is a difference of two rounded products
    bf16 = {"atol": 5e-2, "rtol": 5e-2} if dtype == torch.bfloat16 else {}
    assert_matches_eager(CROSSES[name], a.to(dtype), b.to(dtype), seed=seed, **bf16)


def test_cross_without_dim_warns_as_eager() -> None:
    with pytest.warns(UserWarning, match="Using torch.cross without specifying the dim arg is deprecated"):
        compiler.jit(torch.cross)(torch.randn(3, 2), torch.randn(3, 2))
    with warnings.catch_warnings(), pytest.raises(RuntimeError, match="does not have size 3"):
        warnings.simplefilter("ignore")
        compiler.jit(lambda a, b: torch.linalg.cross(a, b))(torch.randn(2, 4), torch.randn(2, 4))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bilinear_matches_eager(seed: int, dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(seed)
    x1, x2, w, bias = (
        torch.randn(2, 5, 3, generator=g),
        torch.randn(2, 5, 4, generator=g),
        torch.randn(6, 3, 4, generator=g),
        torch.randn(6, generator=g),
    )
    # NOTE: bf16 against eager in float32, within a few bf16 steps: the products are sums of bf16 values
    bf16 = {"reference": torch.float32, "atol": 5e-2, "rtol": 5e-2} if dtype == torch.bfloat16 else {}
    args = [t.to(dtype) for t in (x1, x2, w, bias)]
    assert_matches_eager(F.bilinear, *args, seed=seed, **bf16)
    assert_matches_eager(lambda x1, x2, w, b: torch.bilinear(x1[0].mT.mT, x2[1], w, None), *args, **bf16)


def test_bilinear_module() -> None:
    module, x1, x2 = torch.nn.Bilinear(3, 4, 6), torch.randn(5, 3), torch.randn(5, 4)
    torch.testing.assert_close(compiler.jit(module)(x1, x2), module(x1, x2))
