"""A differentiable value written into an input that does not require grad (`buffer[:, 1:] =
f(weight)`) is written again where autograd records it (runtime/grad_mode.differentiable_writes):
the buffer's later readers get their gradient, as in eager. Through dynamo, a value computed in a
compiled piece and written into a tensor an earlier piece made (Longformer's attention, split by
graph breaks) reaches the next piece with its gradient."""

from __future__ import annotations

import warnings

import pytest
import torch

import compiler


def _write(buffer: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    buffer[:, 1:] = weight * 2
    return (buffer * buffer).sum()


def _eager_and_compiled_gradients(fn, compiled, weight: torch.Tensor, make_buffer) -> list:
    results = []
    for run in (fn, compiled):
        w, buffer = weight.clone().requires_grad_(), make_buffer()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            inside = run(buffer, w)
        later = (buffer * torch.arange(buffer.numel(), dtype=buffer.dtype).view(buffer.shape)).sum()
        (inside + later).backward()
        results.append((inside, buffer.detach(), w.grad))
    return results


@pytest.mark.parametrize("seed", [0, 1])
def test_jit_the_written_inputs_later_readers_get_its_gradient(seed: int) -> None:
    weight = torch.randn(3, 2, generator=torch.Generator().manual_seed(seed))
    eager, compiled = _eager_and_compiled_gradients(_write, compiler.jit(_write), weight, lambda: torch.zeros(3, 3))
    for got, want in zip(compiled, eager):
        torch.testing.assert_close(got, want)


def test_jit_still_writes_a_value_without_grad_into_an_input() -> None:
    weight = torch.randn(2, 2)
    buffer = torch.zeros(2, 3)
    compiler.jit(_write)(buffer, weight)
    torch.testing.assert_close(buffer[:, 1:], weight * 2)


def _program(buffer: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    buffer[:, 1:4] = (torch.ones(4, 6) @ weight).tanh()
    torch._dynamo.graph_break()  # the next graph reads the written buffer
    return (buffer * torch.arange(5.0)).sum()


def test_through_dynamo_the_written_buffer_carries_its_gradient_into_the_next_graph() -> None:
    torch._dynamo.reset()
    weight = torch.randn(6, 3, generator=torch.Generator().manual_seed(3))
    compiled = torch.compile(_program, backend="fusebench")
    eager, got = _eager_and_compiled_gradients(_program, compiled, weight, lambda: torch.zeros(4, 5))
    assert got[2] is not None
    for value, want in zip(got, eager):
        torch.testing.assert_close(value, want)
