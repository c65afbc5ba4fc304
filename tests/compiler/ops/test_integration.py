"""torch.trapezoid / torch.trapz (compiler/ops/integration.py) against eager: dx and x forms, 1-D and
broadcast sample points, every dim, size-0 and size-1 dims, float32, bfloat16 and integer samples,
gradients of y and x."""

from __future__ import annotations

import pytest
import torch

import compiler
from tests.support.eager_match import assert_matches_eager

CASES = {
    "default": lambda y, x: torch.trapezoid(y),
    "dx": lambda y, x: torch.trapz(y, dx=0.3, dim=0),
    "dx strided": lambda y, x: torch.trapezoid(y.mT, dx=2, dim=0),
    "x 1-d": lambda y, x: torch.trapezoid(y, x),
    "trapz x": lambda y, x: torch.trapz(y, x, dim=-1),
    "x full": lambda y, x: torch.trapezoid(y, x.expand(3, 5)),
    "x broadcast dim 0": lambda y, x: torch.trapezoid(y.mT, x[:, None].expand(5, 3), dim=0),
    "one sample": lambda y, x: torch.trapezoid(y[:, :1], x[:1]),
    "no samples": lambda y, x: torch.trapezoid(y[:, :0]),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", sorted(CASES))
def test_trapezoid_matches_eager(name: str, seed: int, dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(seed)
    y, x = torch.randn(3, 5, generator=g), torch.randn(5, generator=g).cumsum(0)
    bf16 = {"reference": torch.float32} if dtype == torch.bfloat16 else {}
    assert_matches_eager(CASES[name], y.to(dtype), x.to(dtype), seed=seed, **bf16)


@pytest.mark.parametrize("name", ["default", "dx", "x 1-d", "no samples"])
def test_trapezoid_of_integers_matches_eager(name: str) -> None:
    y, x = torch.randint(-5, 5, (3, 5), generator=torch.Generator().manual_seed(0)), torch.tensor([0, 1, 3, 4, 7])
    assert_matches_eager(CASES[name], y, x)


def test_trapezoid_checks_the_sample_count() -> None:
    with pytest.raises(RuntimeError, match="There must be one `x` value for each sample point"):
        compiler.jit(torch.trapezoid)(torch.randn(3, 5), torch.randn(4))
