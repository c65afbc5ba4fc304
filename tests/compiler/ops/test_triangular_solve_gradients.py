"""Gradients of torch.linalg.solve_triangular against eager's, for A and B, on random well-conditioned
systems, several seeds: lower and upper, left and right, unit diagonals (A's gradient then leaves the
diagonal and the other triangle at zero, as eager's does), broadcast batch dims."""

from __future__ import annotations

import pytest
import torch

import compiler

CASES = [
    ((5, 5), (5, 3), {"upper": False}),
    ((2, 4, 4), (2, 4, 2), {"upper": True}),
    ((3, 6, 6), (6, 2), {"upper": False, "unitriangular": True}),
    ((4, 4), (3, 4), {"upper": True, "left": False}),
    ((2, 1, 8, 8), (2, 3, 8, 4), {"upper": False, "unitriangular": True}),  # the gated delta rule's use
]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(("a_shape", "b_shape", "options"), CASES)
def test_gradients_match_eager(a_shape: tuple, b_shape: tuple, options: dict, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    n = a_shape[-1]
    a = (torch.randn(a_shape, generator=generator) * 0.3 + 2 * torch.eye(n)).requires_grad_()
    b = torch.randn(b_shape, generator=generator, requires_grad=True)
    cotangent = torch.randn(torch.linalg.solve_triangular(a, b, **options).shape, generator=generator)

    def solve(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.linalg.solve_triangular(a, b, **options)

    got = torch.autograd.grad(compiler.jit(solve)(a, b), (a, b), cotangent)
    want = torch.autograd.grad(solve(a, b), (a, b), cotangent)
    for name, g, w in zip(("A", "B"), got, want):
        torch.testing.assert_close(g, w, msg=lambda m, name=name: f"gradient of {name}: {m}")
