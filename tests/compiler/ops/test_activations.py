"""PReLU (compiler/ops/activations.py) against eager: one weight and one per channel, F.prelu,
torch.prelu, Tensor.prelu and nn.PReLU, values and gradients of input and weight; its errors."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import compiler
from tests.support.eager_match import assert_matches_eager


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("channels", [1, 3])
def test_prelu_matches_eager(channels: int, seed: int, dtype: torch.dtype) -> None:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 3, 4, 5, generator=generator).to(dtype)
    x[0, 0, 0, :2] = 0.0
    weight = torch.randn(channels, generator=generator).to(dtype)
    assert_matches_eager(lambda x, w: F.prelu(x, w), x, weight, seed=seed)
    assert_matches_eager(lambda x, w: torch.prelu(x.mT, w).mT + x[..., 0].prelu(w)[..., None], x, weight)
    assert_matches_eager(lambda x, w: F.prelu(x[:, :, 0, 0], w) + F.prelu(x[0, 0, 0], w[:1]).sum(), x, weight)


def test_prelu_module_per_channel_and_single_weight() -> None:
    x = torch.randn(2, 3, 4, requires_grad=True)
    for module in (torch.nn.PReLU(), torch.nn.PReLU(3, init=-0.4)):
        got, want = compiler.jit(module)(x), module(x)
        torch.testing.assert_close(got, want)
        cotangent = torch.randn_like(want)
        for g, w in zip(
            torch.autograd.grad(got, [x, module.weight], cotangent),
            torch.autograd.grad(want, [x, module.weight], cotangent),
        ):
            torch.testing.assert_close(g, w)


def test_prelu_refuses_a_weight_per_channel_of_the_wrong_count() -> None:
    with pytest.raises(RuntimeError, match="Mismatch of parameter numbers and input channel size"):
        compiler.jit(F.prelu)(torch.randn(2, 3), torch.randn(2))
