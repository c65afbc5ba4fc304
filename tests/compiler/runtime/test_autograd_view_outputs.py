"""A compiled function's output that is a view of its own intermediate, or of one of its inputs, can
be written in place by the caller, as in eager, with eager's gradients (runtime/autograd.py); one
sharing memory with another output stays a view autograd guards."""

from __future__ import annotations

import pytest
import torch

import compiler


def _heads(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """A projection split into heads: a transposed view of the matmul's result."""
    return (x @ w).view(x.shape[0], 2, -1).transpose(0, 1)


def _scaled_in_place(fn, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    y = fn(x, w)
    y /= 3.0
    return (y * torch.arange(y.numel(), dtype=y.dtype).view(y.shape)).sum()


@pytest.mark.parametrize("rows", [1, 3, 5])
def test_a_view_of_an_intermediate_written_in_place_matches_eager(rows: int) -> None:
    for seed in range(2):
        generator = torch.Generator().manual_seed(seed)
        x, w = torch.randn(rows, 4, generator=generator), torch.randn(4, 6, generator=generator)
        grads = []
        for fn in (_heads, compiler.jit(_heads)):
            xs, ws = x.clone().requires_grad_(), w.clone().requires_grad_()
            loss = _scaled_in_place(fn, xs, ws)
            loss.backward()
            grads.append((loss, xs.grad, ws.grad))
        for got, want in zip(grads[1], grads[0]):
            torch.testing.assert_close(got, want)


def _split_heads(h: torch.Tensor) -> torch.Tensor:
    """A view of the input alone (a graph piece after a break gets the projection as its input)."""
    return h.view(h.shape[0], 2, -1).transpose(0, 1)


@pytest.mark.parametrize("rows", [1, 4])
def test_a_view_of_an_input_written_in_place_matches_eager(rows: int) -> None:
    generator = torch.Generator().manual_seed(rows)
    x, w = torch.randn(rows, 4, generator=generator), torch.randn(4, 6, generator=generator)
    grads = []
    for fn in (_split_heads, compiler.jit(_split_heads)):
        xs, ws = x.clone().requires_grad_(), w.clone().requires_grad_()
        projected = xs @ ws  # not a leaf: eager lets a view of it be written in place
        heads = fn(projected)
        heads /= 3.0
        loss = (heads * torch.arange(heads.numel(), dtype=heads.dtype).view(heads.shape)).sum() + projected.sum()
        loss.backward()
        grads.append((loss, xs.grad, ws.grad))
    for got, want in zip(grads[1], grads[0]):
        torch.testing.assert_close(got, want)


def test_through_dynamo_a_view_returned_before_a_graph_break_is_written_in_place() -> None:
    def program(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        y = _heads(x, w)
        torch._dynamo.graph_break()
        y /= 3.0
        return (y * y).sum()

    torch._dynamo.reset()
    compiled = torch.compile(program, backend="fusebench")
    x, w = torch.randn(3, 4), torch.randn(4, 6)
    grads = []
    for fn in (program, compiled):
        xs, ws = x.clone().requires_grad_(), w.clone().requires_grad_()
        fn(xs, ws).backward()
        grads.append((xs.grad, ws.grad))
    for got, want in zip(grads[1], grads[0]):
        torch.testing.assert_close(got, want)


def test_a_view_sharing_memory_with_another_output_stays_guarded_by_autograd() -> None:
    def both(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = x @ w
        return y.t(), y

    view, _ = compiler.jit(both)(torch.randn(3, 4, requires_grad=True), torch.randn(4, 6, requires_grad=True))
    # NOTE: a write into it would change the other output too, which only autograd's view tracking
    # could account for: refused rather than a wrong gradient
    with pytest.raises(RuntimeError, match="is a view and is being modified inplace"):
        view.mul_(2.0)


def test_a_view_without_gradient_stays_without_gradient_and_can_be_written() -> None:
    def program(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        indices = torch.arange(6).view(2, 3).t()  # integer: never differentiable
        return (x @ w).sum(), indices

    _, indices = compiler.jit(program)(torch.randn(3, 4), torch.randn(4, 6, requires_grad=True))
    assert not indices.requires_grad
    indices.add_(1)
    torch.testing.assert_close(indices, torch.arange(6).view(2, 3).t() + 1)
