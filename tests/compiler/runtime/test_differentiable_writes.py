"""A differentiable value written into an input that does not require grad (`buffer[:, 1:] =
f(weight)`) cannot be handed back without autograd's record of the write: `jit` refuses it with a
message naming the input, and through dynamo the piece doing it runs eagerly, with eager's
gradients (a value computed in a compiled piece and written after a graph break into a tensor an
eager piece made, as Longformer's attention does)."""

from __future__ import annotations

import warnings

import pytest
import torch

import compiler


def _write(buffer: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    buffer[:, 1:] = weight * 2
    return buffer


def test_jit_refuses_a_differentiable_write_into_an_input_without_grad() -> None:
    weight = torch.randn(2, 2, requires_grad=True)
    with pytest.raises(NotImplementedError, match=r"into its input buffer, which does not require grad"):
        compiler.jit(_write)(torch.zeros(2, 3), weight)


def test_jit_still_writes_a_value_without_grad_into_an_input() -> None:
    weight = torch.randn(2, 2)
    buffer = torch.zeros(2, 3)
    compiler.jit(_write)(buffer, weight)
    torch.testing.assert_close(buffer[:, 1:], weight * 2)


def _program(x: torch.Tensor, weight: torch.Tensor, buffer: torch.Tensor) -> torch.Tensor:
    buffer[:, 1:4] = (x @ weight).tanh()
    torch._dynamo.graph_break()  # the next graph reads the written buffer
    return (buffer * torch.arange(5.0)).sum()


@pytest.mark.parametrize("seed", [0, 1])
def test_through_dynamo_the_write_gets_eagers_gradients(seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    x, weight = torch.randn(4, 6, generator=generator), torch.randn(6, 3, generator=generator)
    torch._dynamo.reset()
    compiled = torch.compile(_program, backend="fusebench")
    grads = []
    for fn in (_program, compiled):
        w = weight.clone().requires_grad_()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn(x, w, torch.zeros(4, 5)).backward()
        grads.append(w.grad)
    assert grads[1] is not None
    torch.testing.assert_close(grads[1], grads[0])
