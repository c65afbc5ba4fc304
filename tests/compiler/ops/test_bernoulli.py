"""torch.bernoulli / Tensor.bernoulli / Tensor.bernoulli_ through the compiler: draws of 0 and 1 of
the given probability (a number or a tensor), in the target's dtype, new on every call; p = 0 and
p = 1 exact; DropPath's mask as timm writes it; eager's errors. Eager's kernels draw otherwise, so
values are compared in distribution, not one by one."""

from __future__ import annotations

import pytest
import torch

import compiler

N = 200_000


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.int64])
@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
def test_bernoulli_in_place_draws_zeros_and_ones_of_probability_p(dtype, p) -> None:
    def fill(x):
        return x.bernoulli_(p)

    jfn = compiler.jit(fill)
    x = torch.empty(N, dtype=dtype)
    out = jfn(x)
    assert out is x and x.dtype == dtype
    assert set(torch.unique(x).tolist()) <= {0, 1}
    assert abs(x.double().mean().item() - p) < 0.01
    if p in (0.0, 1.0):
        assert torch.equal(x, torch.full_like(x, p))


def test_probabilities_per_element_and_broadcast_p_tensors() -> None:
    probs = torch.tensor([0.0, 1.0, 0.25]).repeat(N // 3, 1)  # [N/3, 3]: one probability per column

    def draws(probs, row_p):
        return torch.bernoulli(probs), probs.bernoulli(0.5), torch.empty_like(probs).bernoulli_(row_p)

    first, half, rows = compiler.jit(draws)(probs, torch.tensor([[0.0], [1.0]]).repeat(N // 6, 1))
    assert torch.equal(first[:, 0], torch.zeros(N // 3)) and torch.equal(first[:, 1], torch.ones(N // 3))
    assert abs(first[:, 2].mean().item() - 0.25) < 0.01 and abs(half.mean().item() - 0.5) < 0.01
    assert torch.equal(rows[0::2], torch.zeros_like(rows[0::2]))
    assert torch.equal(rows[1::2], torch.ones_like(rows[1::2]))


def _drop_path(x, keep: float):
    mask = x.new_empty((x.shape[0],) + (1,) * (x.ndim - 1)).bernoulli_(keep)  # timm's DropPath
    return x * mask.div_(keep)


def test_drop_path_scales_kept_samples_and_zeroes_the_others_with_gradients() -> None:
    jfn = compiler.jit(_drop_path)
    x = torch.randn(4096, 3, 5, requires_grad=True)
    out = jfn(x, 0.8)
    kept = out.flatten(1).ne(0).any(1)
    torch.testing.assert_close(out[kept], x[kept] / 0.8)
    assert torch.equal(out[~kept], torch.zeros_like(out[~kept])) and abs(kept.double().mean().item() - 0.8) < 0.03
    out.sum().backward()
    torch.testing.assert_close(x.grad, kept.float()[:, None, None].expand_as(x) / 0.8)


def test_each_call_draws_new_values() -> None:
    jfn = compiler.jit(lambda x: torch.bernoulli(x))
    probs = torch.full((N,), 0.5)
    assert not torch.equal(jfn(probs), jfn(probs))


@pytest.mark.parametrize(
    ("fn", "error", "says"),
    [
        (lambda x: x.bernoulli_(1.5), RuntimeError, r"expects p to be in \[0, 1\]"),
        (lambda x: torch.bernoulli(x.long()), TypeError, "floating point tensor of probabilities"),
        (lambda x: torch.bernoulli(x, generator=torch.Generator()), NotImplementedError, "generator= is not supported"),
    ],
    ids=["p out of range", "integer probabilities", "generator"],
)
def test_refused_arguments_name_the_problem(fn, error, says) -> None:
    with pytest.raises(error, match=says):
        compiler.jit(fn)(torch.rand(8))
