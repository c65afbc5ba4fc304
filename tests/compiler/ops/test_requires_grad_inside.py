"""`Tensor.requires_grad_()` inside a traced function (MRA's placeholder output for an empty
attention): values and gradients as eager's; `requires_grad_(False)` is one line naming the line."""

from __future__ import annotations

import pytest
import torch

import compiler


def _placeholder(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    empty = torch.zeros_like(x).requires_grad_()
    return (x @ w + empty).tanh()


@pytest.mark.parametrize("seed", [0, 1])
def test_values_and_gradients_as_eager(seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    x, w = torch.randn(3, 3, generator=generator), torch.randn(3, 3, generator=generator, requires_grad=True)
    got, want = compiler.jit(_placeholder)(x, w), _placeholder(x, w)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(torch.autograd.grad(got.sum(), w)[0], torch.autograd.grad(want.sum(), w)[0])


def test_requires_grad_false_is_refused_in_one_line() -> None:
    def freezes(x: torch.Tensor) -> torch.Tensor:
        return (x * 2).requires_grad_(False)

    with pytest.raises(NotImplementedError) as raised:
        compiler.jit(freezes)(torch.randn(2))
    message = str(raised.value)
    assert "\n" not in message and message.startswith("Tensor.requires_grad_(False) inside a traced function")
    assert f"{__file__}:" in message
