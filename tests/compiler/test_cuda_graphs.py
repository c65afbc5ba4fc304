"""jit(cuda_graphs=True): a clear error without CUDA, a fallback with a reason for CPU inputs, and
(on a GPU) replays whose in-place updates and outputs match eager call after call."""

from __future__ import annotations

import pytest
import torch

import compiler
from compiler.runtime.cuda_graphs import GraphedComputation, unavailable_reason


def update(p: torch.Tensor, m: torch.Tensor, g: torch.Tensor, lr: float):
    m.mul_(0.9).add_(g, alpha=0.1)
    p.sub_(m * lr / (g.abs() + 1e-8).sqrt())
    return p.square().sum(), m.sin()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised where CUDA is unavailable")
def test_without_cuda_jit_says_cuda_graphs_need_cuda() -> None:
    with pytest.raises(ValueError, match=r"cuda_graphs=True\): CUDA graphs need CUDA"):
        compiler.jit(update, cuda_graphs=True)
    assert unavailable_reason() is not None


def test_cpu_inputs_run_without_graphs_and_say_why() -> None:
    graphed = GraphedComputation(lambda x, k: x * k)
    x = torch.randn(3)
    for _ in range(3):
        torch.testing.assert_close(graphed(x, 2.0), x * 2.0)
    assert (graphed.stats.captures, graphed.stats.replays, graphed.stats.ungraphed_calls) == (0, 0, 3)
    assert "an input is on cpu" in str(graphed.stats)


def _state(seed: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(64, 33, generator=gen).cuda() for _ in range(3)]


@pytest.mark.gpu
@pytest.mark.parametrize("seed", [0, 1])
def test_replays_update_in_place_and_return_fresh_outputs(seed: int) -> None:
    p, m, g = _state(seed)
    ep, em, eg = (t.clone() for t in (p, m, g))
    jfn = compiler.jit(update, cuda_graphs=True)
    results = []
    for _ in range(6):
        g.copy_(torch.randn_like(g))  # new gradient values, same memory: the graph reads them
        eg.copy_(g)
        got, want = jfn(p, m, g, 1e-2), update(ep, em, eg, 1e-2)
        results.append((got, want))
        torch.testing.assert_close(p, ep)
        torch.testing.assert_close(m, em)
    for got, want in results:  # earlier outputs were not overwritten by later replays
        torch.testing.assert_close(got, want)
    (stats,) = [e.computation.stats for e in jfn.entries]
    assert (stats.captures, stats.replays, stats.ungraphed_calls) == (1, 5, 1)  # warm-up, capture, replays
    assert "1 captures, 5 replays" in str(compiler.examine.cuda_graphs(jfn))


@pytest.mark.gpu
def test_new_addresses_capture_again() -> None:
    jfn = compiler.jit(update, cuda_graphs=True)
    first, second = _state(2), _state(3)
    expected = [[t.clone() for t in first], [t.clone() for t in second]]
    for _ in range(3):
        for state, eager in zip((first, second), expected):
            torch.testing.assert_close(jfn(*state, 1e-2), update(*eager, 1e-2))
            torch.testing.assert_close(state[0], eager[0])
    (stats,) = [e.computation.stats for e in jfn.entries]
    assert (stats.captures, stats.replays) == (2, 4)


@pytest.mark.gpu
def test_a_returned_argument_is_the_updated_memory() -> None:
    def bump(x: torch.Tensor) -> torch.Tensor:
        return x.add_(1)

    x = torch.zeros(8, device="cuda")
    jfn = compiler.jit(bump, cuda_graphs=True)
    outputs = [jfn(x) for _ in range(4)]
    torch.testing.assert_close(x, torch.full_like(x, 4.0))
    torch.testing.assert_close(outputs[-1], x)


@pytest.mark.gpu
def test_a_training_entry_runs_without_graphs_and_says_so() -> None:
    x = torch.randn(16, 8, device="cuda", requires_grad=True)
    jfn = compiler.jit(lambda t: t.sin().square().sum(), cuda_graphs=True)
    for _ in range(3):
        (grad,) = torch.autograd.grad(jfn(x), x)
        torch.testing.assert_close(grad, 2 * x.sin() * x.cos())
    assert "not graphed: a forward and backward for autograd" in str(compiler.examine.cuda_graphs(jfn))
