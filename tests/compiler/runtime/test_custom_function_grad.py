"""A custom `torch.autograd.Function` inside a compiled program (Bloom's GELU): torch runs its
forward with grad off, which is not the program's `torch.no_grad()`: its output still carries the
gradient, through `compiler.jit` and through the dynamo backend (`autograd_function_apply`)."""

from __future__ import annotations

import pytest
import torch

import compiler


class _TanhGelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        inner = 0.79788456 * x * (1 + 0.044715 * x * x)
        t = torch.tanh(inner)
        slope = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * 0.79788456 * (1 + 3 * 0.044715 * x * x)
        return grad * slope


def _block(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return (_TanhGelu.apply(x @ w) * 2).sum()


@pytest.mark.parametrize("entry", ["jit", "dynamo"])
@pytest.mark.parametrize("seed", [0, 1])
def test_a_custom_functions_output_carries_its_gradient(entry: str, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    x, w = torch.randn(4, 3, generator=generator), torch.randn(3, 5, generator=generator)
    w_eager, w_compiled = w.clone().requires_grad_(True), w.clone().requires_grad_(True)
    (want,) = torch.autograd.grad(_block(x, w_eager), w_eager)
    torch._dynamo.reset()
    compiled = compiler.jit(_block) if entry == "jit" else torch.compile(_block, backend="fusebench")
    (got,) = torch.autograd.grad(compiled(x, w_compiled), w_compiled)
    torch.testing.assert_close(got, want)
