"""torch._foreach_norm (what clip_grad_norm_ takes of the gradients with foreach) against eager: ords
2, 1 and inf over lists of mixed shapes, float32 and bfloat16, gradients; the clipping it feeds, and
clip_grad_norm_ after the backward of a jitted module."""

from __future__ import annotations

import copy
import math

import pytest
import torch

import compiler

SHAPES = [(3, 4), (5,), (), (1, 1, 2)]


def _tensors(seed: int, dtype: torch.dtype) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    tensors = [torch.randn(shape, generator=generator).to(dtype) for shape in SHAPES]
    tensors.append(torch.randn(4, 3, generator=generator).to(dtype).t())  # not contiguous
    return tensors


def _tolerance(dtype: torch.dtype) -> dict:
    return {"rtol": 2e-2, "atol": 2e-2} if dtype == torch.bfloat16 else {"rtol": 1e-5, "atol": 1e-5}


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("ord", [2, 1, math.inf])
def test_norms_and_gradients_match_eager(ord: float, dtype: torch.dtype, seed: int) -> None:
    inputs = [t.requires_grad_() for t in _tensors(seed, dtype)]

    def fn(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        return torch._foreach_norm(tensors, ord)

    got, want = compiler.jit(fn)(inputs), fn(inputs)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        torch.testing.assert_close(g, w, **_tolerance(dtype))
    weights = [float(i + 1) for i in range(len(inputs))]
    grads = torch.autograd.grad(sum(w * n for w, n in zip(weights, got)), inputs)
    expected = torch.autograd.grad(sum(w * n for w, n in zip(weights, want)), inputs)
    for g, w in zip(grads, expected, strict=True):
        torch.testing.assert_close(g, w, **_tolerance(dtype))


def test_dtype_gives_the_norms_dtype() -> None:
    tensors = _tensors(0, torch.bfloat16)
    got = compiler.jit(lambda ts: torch._foreach_norm(ts, 2, dtype=torch.float32))(tensors)
    want = torch._foreach_norm(tensors, 2, dtype=torch.float32)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == torch.float32
        torch.testing.assert_close(g, w)


def _clip(grads: list[torch.Tensor], max_norm: float) -> torch.Tensor:
    """clip_grad_norm_'s foreach path written out: the total norm, then each gradient scaled in place."""
    total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads, 2.0)), 2.0)
    coefficient = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    torch._foreach_mul_(grads, coefficient)
    return total


@pytest.mark.parametrize("max_norm", [0.5, 100.0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_clipping_in_place_matches_clip_grads_with_norm(dtype: torch.dtype, max_norm: float) -> None:
    grads = _tensors(3, dtype)
    params = [torch.zeros_like(g, requires_grad=True) for g in grads]
    for p, g in zip(params, grads):
        p.grad = g.clone()
    want = torch.nn.utils.get_total_norm([p.grad for p in params], 2.0, foreach=True)
    torch.nn.utils.clip_grads_with_norm_(params, max_norm, want, foreach=True)
    got = compiler.jit(_clip)(grads, max_norm)
    torch.testing.assert_close(got, want, **_tolerance(dtype))
    for g, p in zip(grads, params, strict=True):
        torch.testing.assert_close(g, p.grad, **_tolerance(dtype))


def test_clip_grad_norm_after_a_jitted_modules_backward_matches_eager() -> None:
    torch.manual_seed(0)
    eager = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    model = copy.deepcopy(eager)
    jitted = compiler.jit(model)
    x = torch.randn(5, 4)
    norms = []
    for run, module in ((eager, eager), (jitted, model)):
        run(x).square().sum().backward()
        norms.append(torch.nn.utils.clip_grad_norm_(module.parameters(), 0.1, foreach=True))
    torch.testing.assert_close(norms[1], norms[0], rtol=1e-5, atol=1e-5)
    for compiled, expected in zip(model.parameters(), eager.parameters()):
        torch.testing.assert_close(compiled.grad, expected.grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("norm_type", [2.0, math.inf])
def test_torchs_get_total_norm_with_foreach_traces(norm_type: float) -> None:
    """torch groups a foreach call's tensors by device and dtype in C, which refuses traced tensors."""

    def clip(grads: list[torch.Tensor]) -> torch.Tensor:
        norm = torch.nn.utils.get_total_norm(grads, norm_type, foreach=True)
        torch._foreach_mul_(grads, (1.0 / (norm + 1e-6)).clamp(max=1.0))
        return norm

    gen = torch.Generator().manual_seed(0)
    grads = [torch.randn(3, 4, generator=gen), torch.randn(5, generator=gen), torch.randn(2, 2, generator=gen).double()]
    expected = [g.clone() for g in grads]
    torch.testing.assert_close(compiler.jit(clip)(grads), clip(expected))
    for actual, want in zip(grads, expected):
        torch.testing.assert_close(actual, want)
