"""Layers whose training mode draws noise (compiler/ops/stochastic_layers.py): rrelu in eval mode,
alpha_dropout / feature_alpha_dropout (eval: the input itself; training: eager's values under one
seed), gumbel_softmax (eager's draw under one seed, hard and soft), and rrelu's refused training."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import compiler
from tests.support.eager_match import assert_matches_eager, tolerance


def _input(seed: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.randn(2, 3, 4, 5, generator=torch.Generator().manual_seed(seed)).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rrelu_in_eval_mode_is_leaky_relu_with_the_mean_slope(seed: int, dtype: torch.dtype) -> None:
    x = _input(seed, dtype)
    assert_matches_eager(lambda x: F.rrelu(x) + torch.rrelu(x.mT, 0.1, 0.4).mT, x)
    y, z = x.clone(), x.clone()
    compiler.jit(lambda y: F.rrelu(y, 0.2, 0.3, inplace=True))(y)
    torch.testing.assert_close(y, F.rrelu(z, 0.2, 0.3, inplace=True))


def test_rrelu_in_training_is_refused_naming_the_argument() -> None:
    with pytest.raises(NotImplementedError, match="rrelu: training=True is not supported"):
        compiler.jit(lambda x: F.rrelu(x, training=True))(torch.randn(3))


_SEEDED = {
    "alpha_dropout": lambda x: F.alpha_dropout(x, 0.3, training=True),
    "alpha_dropout strided": lambda x: F.alpha_dropout(x.mT[:, 1:], 0.6, True),
    "torch.alpha_dropout": lambda x: torch.alpha_dropout(x, 0.2, True),
    "feature_alpha_dropout": lambda x: F.feature_alpha_dropout(x, 0.5, training=True),
    "torch.feature_alpha_dropout": lambda x: torch.feature_alpha_dropout(x[:, :, 0], 0.25, True),
    "gumbel_softmax": lambda x: F.gumbel_softmax(x, tau=0.7),
    "gumbel_softmax hard": lambda x: F.gumbel_softmax(x, hard=True, dim=1),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", sorted(_SEEDED))
def test_training_draws_match_eager_under_one_seed(name: str, seed: int, dtype: torch.dtype) -> None:
    fn, x = _SEEDED[name], _input(seed, dtype).requires_grad_()
    torch.manual_seed(seed)
    got = compiler.jit(fn)(x)
    torch.manual_seed(seed)
    want = fn(x)
    assert got.dtype == want.dtype
    # NOTE: the same draws; gumbel_softmax's softmax may round otherwise than eager's kernel
    close = tolerance(dtype) if name.startswith("gumbel") else {"atol": 0, "rtol": 0}
    torch.testing.assert_close(got, want, **close)
    cotangent = torch.randn_like(want)
    got_grad, want_grad = torch.autograd.grad(got, x, cotangent)[0], torch.autograd.grad(want, x, cotangent)[0]
    torch.testing.assert_close(got_grad, want_grad, **tolerance(dtype))


def test_alpha_dropouts_in_eval_mode_return_the_input_and_nn_modules_draw_in_training() -> None:
    x = _input(0, torch.float32)
    assert compiler.jit(lambda x: F.alpha_dropout(x, 0.5))(x) is x
    assert compiler.jit(lambda x: F.feature_alpha_dropout(x, 0.5, training=False))(x) is x
    module = torch.nn.AlphaDropout(0.4)
    torch.manual_seed(5)
    got = compiler.jit(module)(x)
    torch.manual_seed(5)
    torch.testing.assert_close(got, module(x), atol=0, rtol=0)
    assert_matches_eager(lambda x: F.alpha_dropout(x, 1.0, True) + F.alpha_dropout(x, 0.0, True), x)


def test_alpha_dropout_checks_p() -> None:
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
        compiler.jit(lambda x: F.alpha_dropout(x, 1.5, True))(torch.randn(3))
