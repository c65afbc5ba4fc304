"""`tensor.data` while tracing: the same memory without autograd history, as in eager."""

from __future__ import annotations

import pytest
import torch

import compiler


def clip_then_loss(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    w.data.clamp_(-0.5, 0.5)  # as Gemma-3n clips a weight inside its forward
    return (w * x).sin().sum()


def scaled_copy(w: torch.Tensor) -> torch.Tensor:
    return w.data * 2 + w


def _leaf(seed: int, shape: tuple[int, ...]) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).requires_grad_()


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("shape", [(5, 3), (1, 4), (7,)])
def test_a_write_through_data_reaches_the_tensor_and_its_gradient_is_eager_s(seed: int, shape: tuple) -> None:
    w_eager, w_jit = _leaf(seed, shape), _leaf(seed, shape)
    x = torch.randn(shape, generator=torch.Generator().manual_seed(seed + 10))
    want = clip_then_loss(w_eager, x)
    got = compiler.jit(clip_then_loss)(w_jit, x)
    want.backward()
    got.backward()
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(w_jit.detach(), w_eager.detach())  # clipped in place
    torch.testing.assert_close(w_jit.grad, w_eager.grad)
    assert w_jit.is_leaf and w_jit.requires_grad


def test_a_value_read_through_data_carries_no_gradient() -> None:
    w_eager, w_jit = _leaf(3, (4, 4)), _leaf(3, (4, 4))
    want, got = scaled_copy(w_eager), compiler.jit(scaled_copy)(w_jit)
    torch.testing.assert_close(got, want)
    want.sum().backward()
    got.sum().backward()
    torch.testing.assert_close(w_jit.grad, w_eager.grad)  # ones: only the `+ w` term differentiates


def test_assigning_data_is_one_line_naming_the_tensor() -> None:
    def rebind(w: torch.Tensor) -> torch.Tensor:
        w.data = torch.zeros_like(w)
        return w

    with pytest.raises(NotImplementedError, match=r"assigning \w+\.data is not supported while tracing"):
        compiler.jit(rebind)(torch.randn(3))
