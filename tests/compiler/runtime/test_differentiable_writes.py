"""A differentiable value written into an input that does not require grad (`buffer[:, 1:] =
f(weight)`) is written again where autograd records it (runtime/grad_mode.differentiable_writes):
the buffer's later readers get their gradient, as in eager; a function that returns the written input
returns that input itself, as eager does. Through dynamo, a value computed in a
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


def _mul_returning_loss(out: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    out.mul_(a)
    return out.sum()


def _mul_returning_the_input(out: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    out.mul_(a)
    return out


def _mul_returning_a_view_of_the_input(out: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    out.mul_(a)
    return out[1:].t()


def _mul_returning_nothing(out: torch.Tensor, a: torch.Tensor) -> None:
    out.mul_(a)


def _copy_returning_other(out: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    out.copy_(a)
    return a * 2


def _indexed_store(out: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    out[1] = a[0]
    return (out * out).sum()


def _add_into_a_slice(out: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    out[:, 1:].add_(a[:, 1:])
    return out


def _add_through_a_view(out: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    out.view(-1).add_(a.view(-1))
    return (out * out).sum()


def _twice(out: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    out.mul_(a)
    out.add_(a.exp())
    return out.sum(0)


WRITERS = [
    _mul_returning_loss,
    _mul_returning_the_input,
    _mul_returning_a_view_of_the_input,
    _mul_returning_nothing,
    _copy_returning_other,
    _indexed_store,
    _add_into_a_slice,
    _add_through_a_view,
    _twice,
]


def _written_then_read(run, seed: int, out_of_a_base: bool) -> tuple:
    """Calls `run(out, a)` with `a` requiring grad and `out` not (a tensor, or a row slice of a
    larger one), then reads `out` (and its base) as the caller would; (returned value,
    out.requires_grad, loss, a.grad)."""
    generator = torch.Generator().manual_seed(seed)
    base = torch.randn(5, 4, generator=generator)
    out = base[1:4] if out_of_a_base else base[:3].clone()
    a = torch.randn(3, 4, generator=generator).requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        returned = run(out, a)
    loss = (out * torch.linspace(-1.0, 1.0, 12).view(3, 4)).sum() + (base**2).sum()
    if isinstance(returned, torch.Tensor) and returned.requires_grad:
        loss = loss + (returned * returned).sum()
    loss.backward()
    value = None if returned is None else returned.detach()
    return value, out.requires_grad, base.requires_grad, loss.detach(), a.grad


@pytest.mark.parametrize("entry", ["jit", "dynamo"])
@pytest.mark.parametrize("writer", WRITERS, ids=lambda w: w.__name__.strip("_"))
def test_a_value_requiring_grad_written_into_a_plain_input_gives_eagers_gradients(writer, entry: str) -> None:
    if entry == "dynamo":
        torch._dynamo.reset()
    compiled = compiler.jit(writer) if entry == "jit" else torch.compile(writer, backend="fusebench")
    for seed, out_of_a_base in ((0, False), (1, True), (2, False)):
        want, got = _written_then_read(writer, seed, out_of_a_base), _written_then_read(compiled, seed, out_of_a_base)
        for g, w in zip(got, want):
            if isinstance(w, torch.Tensor):
                assert g is not None and float((g - w).norm() / w.norm().clamp_min(1e-12)) <= 1e-3
            else:
                assert g == w


def _write_and_view(buffer: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    buffer[:, 1:] = weight * 2
    return buffer.t()  # a view of the written input (Longformer's attention scores, transposed)


def test_a_view_of_the_written_input_takes_in_place_writes_and_carries_the_gradient() -> None:
    weight = torch.randn(3, 2, generator=torch.Generator().manual_seed(5))
    grads = []
    for run in (_write_and_view, compiler.jit(_write_and_view)):
        w, buffer = weight.clone().requires_grad_(), torch.zeros(3, 3)
        scores = run(buffer, w)
        scores += torch.ones(3, 3)  # the caller adds into the view in place (`attn_scores += mask`)
        (scores * torch.arange(9.0).view(3, 3)).sum().backward()
        grads.append((scores.detach(), buffer.detach(), w.grad))
    for got, want in zip(grads[1], grads[0]):
        torch.testing.assert_close(got, want)
