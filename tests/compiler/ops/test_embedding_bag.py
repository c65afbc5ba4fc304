"""F.embedding_bag / nn.EmbeddingBag against eager: modes sum, mean and max; bags by offsets (empty
bags, include_last_offset, int32) or by the rows of a 2-D input; padding_idx; per_sample_weights
with sum; float32 and bfloat16; gradients of the weight (and of per_sample_weights)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import compiler

BAGS = {
    "offsets_with_an_empty_bag": (torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]), torch.tensor([0, 4, 4, 6])),
    "offsets_include_last": (torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]), torch.tensor([0, 3, 8])),
    "offsets_int32_one_bag": (torch.tensor([7, 0, 7], dtype=torch.int32), torch.tensor([0], dtype=torch.int32)),
    "rows": (torch.tensor([[1, 2, 0], [4, 0, 0]]), None),
    "one_row_of_one": (torch.tensor([[3]]), None),
}


def _tolerance(dtype: torch.dtype) -> dict:
    return {"rtol": 2e-2, "atol": 2e-2} if dtype == torch.bfloat16 else {"rtol": 1e-5, "atol": 1e-5}


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("padding_idx", [None, 0, -1])
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("bags", list(BAGS))
def test_bags_and_gradients_match_eager(bags: str, mode: str, padding_idx: int | None, dtype: torch.dtype, seed: int):
    input, offsets = BAGS[bags]
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randn(10, 3, generator=generator).to(dtype).requires_grad_()
    per_sample = torch.randn(input.shape, generator=generator).to(dtype).requires_grad_() if mode == "sum" else None
    last = bags == "offsets_include_last"

    def fn(i, w, o, p):
        return F.embedding_bag(
            i, w, o, mode=mode, padding_idx=padding_idx, per_sample_weights=p, include_last_offset=last
        )

    got, want = compiler.jit(fn)(input, weight, offsets, per_sample), fn(input, weight, offsets, per_sample)
    assert got.shape == want.shape and got.dtype == want.dtype
    torch.testing.assert_close(got, want, **_tolerance(dtype))
    cotangent = torch.randn(want.shape, generator=generator).to(dtype)
    inputs = (weight,) if per_sample is None else (weight, per_sample)
    for g, e in zip(torch.autograd.grad(got, inputs, cotangent), torch.autograd.grad(want, inputs, cotangent)):
        torch.testing.assert_close(g, e, **_tolerance(dtype))


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_the_module_matches_eager(mode: str) -> None:
    torch.manual_seed(0)
    module = torch.nn.EmbeddingBag(12, 4, mode=mode, padding_idx=2)
    input, offsets = torch.tensor([2, 5, 7, 2, 11, 0]), torch.tensor([0, 2, 2, 5])
    got, want = compiler.jit(module)(input, offsets), module(input, offsets)
    torch.testing.assert_close(got, want)
    grads = torch.autograd.grad(got.square().sum(), module.weight)
    torch.testing.assert_close(grads[0], torch.autograd.grad(want.square().sum(), module.weight)[0])


def test_per_sample_weights_with_mean_is_refused_naming_the_argument() -> None:
    fn = lambda i, w, p: F.embedding_bag(i, w, mode="mean", per_sample_weights=p)
    with pytest.raises(NotImplementedError, match=r"F\.embedding_bag: per_sample_weights is only supported"):
        compiler.jit(fn)(torch.tensor([[1, 2]]), torch.randn(4, 2), torch.ones(1, 2))


def test_max_norm_is_refused_naming_the_argument() -> None:
    with pytest.raises(NotImplementedError, match=r"F\.embedding_bag: max_norm is not supported"):
        compiler.jit(lambda i, w: F.embedding_bag(i, w, max_norm=1.0))(torch.tensor([[1, 2]]), torch.randn(4, 2))
