"""A tensor requiring grad updated where autograd does not record (under `torch.no_grad()`, or
through a detached alias) by a function that also returns values carrying a gradient (weight
clipping, an EMA, weight decay after the loss): the update is written as eager writes it (not
differentiated, the input's version counter moved), and the returned values get eager's
gradients, also those computed from the updated tensor, whose gradient goes to the tensor itself
as in eager (`prims.updated_without_grad`)."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import pytest
import torch

import compiler


def _clip_after_the_loss(w: torch.Tensor, x: torch.Tensor, avg: torch.Tensor) -> torch.Tensor:
    loss = ((x @ w).tanh() ** 2).sum()
    with torch.no_grad():
        w.clamp_(-0.5, 0.5)
    return loss


def _ema_and_decay(w: torch.Tensor, x: torch.Tensor, avg: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    loss = (x @ w).relu().sum()
    with torch.no_grad():
        avg.mul_(0.9).add_(w, alpha=0.1)
        w.mul_(0.99)
        w_norm = w.norm()  # NOTE: reads the updated input without grad: allowed
    return loss, w_norm


def _clip_a_slice(w: torch.Tensor, x: torch.Tensor, avg: torch.Tensor) -> torch.Tensor:
    loss = (x @ w.exp()).mean()
    with torch.no_grad():
        w[:, :2] = w[:, :2].clamp(max=0.1)
    return loss


UPDATES = [_clip_after_the_loss, _ema_and_decay, _clip_a_slice]


def _call(fn: Callable, seed: int, x_requires_grad: bool = False) -> tuple:
    """(outputs, their requires_grad flags, w after the call, w's version moved, avg, w.grad)."""
    generator = torch.Generator().manual_seed(seed)
    w = torch.randn(4, 5, generator=generator).requires_grad_()
    x = torch.randn(3, 4, generator=generator).requires_grad_(x_requires_grad)
    avg = torch.randn(4, 5, generator=generator)
    version = w._version
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outputs = fn(w, x, avg)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    flags = tuple(o.requires_grad for o in outputs)
    outputs[0].backward()
    moved = w._version > version
    return tuple(o.detach() for o in outputs), flags, w.detach(), moved, avg, w.grad, x.grad


def _close(got: object, want: object) -> None:
    if isinstance(want, tuple):
        for g, w in zip(got, want, strict=True):
            _close(g, w)
    elif isinstance(want, torch.Tensor):
        assert float((got - want).norm() / want.norm().clamp_min(1e-12)) <= 1e-3
    else:
        assert got == want


@pytest.mark.parametrize("entry", ["jit", "dynamo"])
@pytest.mark.parametrize("update", UPDATES, ids=lambda u: u.__name__.strip("_"))
def test_an_update_under_no_grad_next_to_a_returned_loss_matches_eager(update: Callable, entry: str) -> None:
    torch._dynamo.reset()
    compiled = compiler.jit(update) if entry == "jit" else torch.compile(update, backend="fusebench")
    for seed in range(3):
        _close(_call(compiled, seed), _call(update, seed))


def test_the_backward_reads_the_values_from_before_the_update() -> None:
    """Eager refuses this backward (the matmul saved `w`, since written); the compiled function
    saved a copy, so its gradient is that of the loss as computed, before the update."""
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        _call(_ema_and_decay, 0, x_requires_grad=True)
    got = _call(compiler.jit(_ema_and_decay), 0, x_requires_grad=True)

    def loss_alone(w: torch.Tensor, x: torch.Tensor, avg: torch.Tensor) -> torch.Tensor:
        return (x @ w).relu().sum()

    want = _call(loss_alone, 0, x_requires_grad=True)
    _close(got[5:], want[5:])


def _clip_then_use(w: torch.Tensor, x: torch.Tensor, avg: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        w.clamp_(-0.5, 0.5)
    return ((x @ w).tanh() ** 2).sum()


def _scaled_then_returned_times_three(w: torch.Tensor, x: torch.Tensor, avg: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        w.mul_(2)
    return (w * 3).sum()


def _intermediate_scaled(w: torch.Tensor, x: torch.Tensor, avg: torch.Tensor) -> torch.Tensor:
    h = x @ w
    with torch.no_grad():
        h.mul_(3)
    return (h * h).sum()


def _intermediate_slice_zeroed(w: torch.Tensor, x: torch.Tensor, avg: torch.Tensor) -> torch.Tensor:
    h = (x @ w) * 2
    with torch.no_grad():
        h[:, :1] = 0
    return (h * torch.linspace(-1.0, 1.0, h.numel()).view(h.shape)).sum()


def _through_a_detached_alias(w: torch.Tensor, x: torch.Tensor, avg: torch.Tensor) -> torch.Tensor:
    h = x @ w
    h.detach()[:, 1:].mul_(5)
    return (h * h).sum() + h[0].sum()


def _input_slice_clipped_then_used(w: torch.Tensor, x: torch.Tensor, avg: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        w[1:].clamp_(max=0.2)
    return (x @ w).exp().mean()


READS_AFTER = [
    _clip_then_use,
    _scaled_then_returned_times_three,
    _intermediate_scaled,
    _intermediate_slice_zeroed,
    _through_a_detached_alias,
    _input_slice_clipped_then_used,
]


@pytest.mark.parametrize("entry", ["jit", "dynamo"])
@pytest.mark.parametrize("program", READS_AFTER, ids=lambda p: p.__name__.strip("_"))
def test_reads_after_an_update_autograd_does_not_record_send_their_gradient_to_the_tensor(
    program: Callable, entry: str
) -> None:
    """In eager the updated tensor stays the same autograd variable: a later read's gradient goes
    to it (and on to its history), whatever the update wrote."""
    torch._dynamo.reset()
    compiled = compiler.jit(program) if entry == "jit" else torch.compile(program, backend="fusebench")
    for seed in range(3):
        _close(_call(compiled, seed, x_requires_grad=True), _call(program, seed, x_requires_grad=True))
