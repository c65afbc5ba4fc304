"""poisson_nll_loss and gaussian_nll_loss (compiler/ops/likelihood_losses.py) against eager: every
reduction, log_input / full / eps, var of the input's shape, one dim short, of size 1 along a dim or
a float, float32 and bfloat16, gradients of input and var; nn.PoissonNLLLoss / nn.GaussianNLLLoss."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import compiler
from tests.support.eager_match import assert_matches_eager


def _data(seed: int, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    x, y = torch.randn(2, 5, 4, generator=g)
    counts = torch.randint(0, 6, (5, 4), generator=g).float()
    var = torch.rand(5, 4, generator=g) + 1e-3
    if dtype == torch.float32:
        var[0, 0] = 1e-9  # clamped to eps (in bf16 its gradient, ~1e12, is a difference of rounded terms)
    return x.to(dtype), y.to(dtype), counts.to(dtype), var.to(dtype)


POISSON = {
    "log_input": lambda x, t, r: F.poisson_nll_loss(x, t, reduction=r),
    "rate": lambda x, t, r: F.poisson_nll_loss(x.exp().mT, t.mT, log_input=False, eps=1e-4, reduction=r),
    "full": lambda x, t, r: F.poisson_nll_loss(x, t, full=True, reduction=r),
    "rate full": lambda x, t, r: F.poisson_nll_loss(x.abs(), t, log_input=False, full=True, reduction=r),
}
GAUSSIAN = {
    "same shape": lambda x, y, v, r: F.gaussian_nll_loss(x, y, v, reduction=r),
    "full eps": lambda x, y, v, r: F.gaussian_nll_loss(x, y.mT.mT, v, full=True, eps=1e-2, reduction=r),
    "one dim short": lambda x, y, v, r: F.gaussian_nll_loss(x, y, v[:, 0], reduction=r),
    "size-1 dim": lambda x, y, v, r: F.gaussian_nll_loss(x, y, v[:1], reduction=r),
    "float var": lambda x, y, v, r: F.gaussian_nll_loss(x, y, 0.7, reduction=r) + v.sum() * 0,
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("name", sorted(POISSON))
def test_poisson_nll_loss_matches_eager(name: str, reduction: str, seed: int, dtype: torch.dtype) -> None:
    x, _, counts, _ = _data(seed, dtype)
    assert_matches_eager(lambda x, t: POISSON[name](x, t, reduction), x, counts, frozen=(1,), seed=seed)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("name", sorted(GAUSSIAN))
def test_gaussian_nll_loss_matches_eager(name: str, reduction: str, seed: int, dtype: torch.dtype) -> None:
    x, y, _, var = _data(seed, dtype)
    # NOTE: bf16 against eager in float32, within a few bf16 steps: var's broadcast gradient is a sum
    # of bf16 values, rounded in other steps
    bf16 = {"reference": torch.float32, "atol": 5e-2, "rtol": 5e-2} if dtype == torch.bfloat16 else {}
    assert_matches_eager(lambda x, y, v: GAUSSIAN[name](x, y, v, reduction), x, y, var, seed=seed, **bf16)


def test_nn_modules_and_errors() -> None:
    x, y, counts, var = _data(0, torch.float32)
    module = torch.nn.PoissonNLLLoss(log_input=False, full=True)
    torch.testing.assert_close(compiler.jit(module)(x.exp(), counts), module(x.exp(), counts))
    module = torch.nn.GaussianNLLLoss(full=True, reduction="sum")
    torch.testing.assert_close(compiler.jit(module)(x, y, var), module(x, y, var))
    with pytest.raises(ValueError, match="var is of incorrect size"):
        compiler.jit(F.gaussian_nll_loss)(x, y, var[:2, :2])
    with pytest.raises(ValueError, match="var has negative entry"):
        compiler.jit(lambda x, y: F.gaussian_nll_loss(x, y, -1.0))(x, y)
