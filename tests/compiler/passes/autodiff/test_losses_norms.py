"""Gradients of the vector norms and pointwise losses against eager autograd, 3 seeds, f32 and bf16."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

import compiler
from tests.support.autodiff_util import check_gradients

DTYPES = [torch.float32, torch.bfloat16]
SEEDS = range(3)


def randn(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def rand(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    return torch.rand(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def with_zero_row(x: torch.Tensor) -> torch.Tensor:
    """`x` with its second row zero: where the norm is 0 (torch's gradient there is 0, not NaN)."""
    x = x.clone()
    x[1] = 0
    return x


NORMS: dict[str, Callable] = {
    "vector_norm_2": lambda x: torch.linalg.vector_norm(x, dim=1),
    "vector_norm_1": lambda x: torch.linalg.vector_norm(x, 1, dim=-1, keepdim=True),
    "vector_norm_inf": lambda x: torch.linalg.vector_norm(x, math.inf, dim=1),
    "vector_norm_3": lambda x: torch.linalg.vector_norm(x, 3, dim=1),
    "vector_norm_half": lambda x: torch.linalg.vector_norm(x, 0.5, dim=1),
    "vector_norm_all": lambda x: torch.linalg.vector_norm(x),
    "norm_fro": lambda x: torch.norm(x, dim=1),
    "tensor_norm": lambda x: x.norm(2, dim=1),
    "normalize": lambda x: F.normalize(x, dim=1),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", list(NORMS))
def test_norm_gradients_with_an_all_zero_row(name: str, dtype: torch.dtype) -> None:
    for seed in SEEDS:
        x = with_zero_row(randn(4, 6, dtype=dtype, seed=seed))
        jfn = check_gradients(NORMS[name], [x], seed=seed)
        x = x.clone().requires_grad_()
        jfn(x).sum().backward()
        assert not x.grad.isnan().any(), f"{name}: NaN gradient at a zero vector"


def test_vector_norm_gradient_at_zero_is_zero() -> None:
    x = torch.zeros(5, requires_grad=True)
    compiler.jit(lambda a: torch.linalg.vector_norm(a))(x).backward()
    assert torch.equal(x.grad, torch.zeros(5))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cosine_similarity_gradients(dtype: torch.dtype) -> None:
    for seed in SEEDS:
        x1, x2 = randn(4, 6, dtype=dtype, seed=seed), randn(1, 6, dtype=dtype, seed=seed + 10)
        check_gradients(lambda a, b: F.cosine_similarity(a, b), [x1, x2], seed=seed)
        check_gradients(lambda a, b: F.cosine_similarity(a, b), [with_zero_row(x1), x2 * 0], seed=seed)


LOSSES: dict[str, Callable] = {
    "mse_loss": lambda x, t, w: F.mse_loss(x, t),
    "mse_loss_weighted": lambda x, t, w: F.mse_loss(x, t, reduction="mean", weight=w),
    "l1_loss": lambda x, t, w: F.l1_loss(x, t, reduction="sum"),
    "smooth_l1_loss": lambda x, t, w: F.smooth_l1_loss(x * 2, t, beta=0.5),
    "huber_loss": lambda x, t, w: F.huber_loss(x * 2, t, reduction="none", delta=0.7),
    "bce_with_logits": lambda x, t, w: F.binary_cross_entropy_with_logits(x * 5, torch.sigmoid(t), w),
    "bce_with_logits_pos_weight": lambda x, t, w: F.binary_cross_entropy_with_logits(
        x, torch.sigmoid(t), reduction="sum", pos_weight=w[0]
    ),
    "bce": lambda x, t, w: F.binary_cross_entropy(torch.sigmoid(x), torch.sigmoid(t), w),
    "kl_div": lambda x, t, w: F.kl_div(torch.log_softmax(x, 1), torch.softmax(t, 1), reduction="batchmean"),
    "kl_div_log_target": lambda x, t, w: F.kl_div(x, torch.log_softmax(t, 1), reduction="sum", log_target=True),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", list(LOSSES))
def test_loss_gradients(name: str, dtype: torch.dtype) -> None:
    for seed in SEEDS:
        x, t = randn(4, 6, dtype=dtype, seed=seed), randn(4, 6, dtype=dtype, seed=seed + 10)
        w = rand(4, 6, dtype=dtype, seed=seed + 20) + 0.5
        # NOTE: eager refuses gradients for the (pos_)weight of the binary cross entropies.
        check_gradients(LOSSES[name], [x, t, w], [True, True, False], seed=seed)


def test_kl_div_zero_targets_have_finite_input_gradients() -> None:
    target = torch.softmax(randn(3, 6), 1)
    target[:, ::2] = 0.0
    check_gradients(lambda x, t: F.kl_div(x, t, reduction="batchmean"), [randn(3, 6), target], [True, False])
