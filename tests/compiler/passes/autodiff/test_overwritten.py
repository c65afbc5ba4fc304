"""A tensor overwritten where autograd records (`zero_()`, `fill_()`, `copy_` of a constant) still
carries a gradient, as in eager: the result requires grad, `.backward()` through it works, and what
it overwrote gets a zero gradient (`.grad` zeros, not None), as does everything a zero gradient
reaches through a chain of prims (functionalize's `prims.overwritten`, autodiff's zero gradients)."""

from __future__ import annotations

import pytest
import torch

import compiler
from compiler import last_traces
from compiler.prims import Prim


def _zero(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    y = x * w
    y.zero_()
    return y, (x * 2).sum()


def _fill_through_a_view(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    y = (x * w).t()
    y.fill_(3.0)
    return (y * y).sum()


def _copy_a_constant(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    y = x + w
    y.copy_(torch.ones_like(y))
    return y * x


def _floor_of_a_product(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.floor(x * w), (x * 3).sum()


def _written_after_read(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    y = x * w
    z = y.exp()
    y.zero_()
    return z + y


def _run(fn, x: torch.Tensor, w: torch.Tensor) -> tuple[list, list]:
    x, w = x.clone().requires_grad_(), w.clone().requires_grad_()
    out = fn(x, w)
    outs = out if isinstance(out, tuple) else (out,)
    flags = [o.requires_grad for o in outs]
    sum(o.float().sum() for o in outs).backward()
    return [o.detach() for o in outs] + flags, [x.grad, w.grad]


_PROGRAMS = [_zero, _fill_through_a_view, _copy_a_constant, _floor_of_a_product, _written_after_read]


@pytest.mark.parametrize("executors", [["torch"], ["inductor", "torch"]], ids=["torch", "inductor"])
@pytest.mark.parametrize("fn", _PROGRAMS)
@pytest.mark.parametrize("seed", [0, 1])
def test_an_overwritten_tensor_keeps_its_gradient_as_in_eager(fn, executors: list[str], seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    x, w = torch.randn(3, 4, generator=g), torch.randn(3, 4, generator=g)
    want_out, want_grads = _run(fn, x, w)
    got_out, got_grads = _run(compiler.jit(fn, executors=executors), x, w)
    assert got_out[len(got_out) // 2 :] == want_out[len(want_out) // 2 :]  # requires_grad flags
    torch.testing.assert_close(got_out[: len(got_out) // 2], want_out[: len(want_out) // 2])
    for got, want in zip(got_grads, want_grads):
        assert (got is None) == (want is None), (got, want)
        if want is not None:
            torch.testing.assert_close(got, want)


def test_without_grad_the_overwritten_contents_are_not_computed() -> None:
    jitted = compiler.jit(_zero)
    y, _ = jitted(torch.randn(3, 4), torch.randn(3, 4))
    assert not y.any()
    final = last_traces(jitted)[-1]
    assert all(b.sym is not Prim.OVERWRITTEN for b in final.bsyms), final
    assert "prims.mul(x, w)" not in str(final), final
