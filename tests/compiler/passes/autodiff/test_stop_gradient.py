"""`detach` is a stop-gradient (`prims.stop_gradient`): gradients against eager autograd, and the
prim gone from what runs (no line in the forward or backward but a returned detached tensor)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import compiler
from compiler.prims import Prim
from tests.support.autodiff_util import check_gradients

SEEDS = range(3)


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def times_detached_self(x):
    return x * x.detach()


def minus_detached_self_exp(x):
    return (x - x.detach()).exp() * x


def detached_intermediate(x, w):
    h = torch.tanh(x @ w)
    return h * h.detach().sum(-1, keepdim=True) + torch.detach(h).sin()


def detached_loss_weight(x, y):
    error = (x - y) ** 2
    weight = torch.softmax(error.detach(), -1)
    return (weight * error).sum()


@pytest.mark.parametrize(
    "fn, shapes",
    [
        (times_detached_self, [(4, 5)]),
        (minus_detached_self_exp, [(3, 7)]),
        (detached_intermediate, [(4, 6), (6, 3)]),
        (detached_loss_weight, [(5, 8), (5, 8)]),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_no_gradient_flows_through_detach(fn, shapes):
    for seed in SEEDS:
        args = [randn(*shape, seed=seed + 10 * i) for i, shape in enumerate(shapes)]
        jfn = check_gradients(fn, args, seed=seed)
    for trace in [compiler.last_traces(jfn)[-1], *compiler.last_backward_traces(jfn)]:
        assert all(b.sym is not Prim.STOP_GRADIENT for b in trace.bsyms), trace


def test_the_gradient_of_x_times_detached_x_is_x():
    x = randn(6, seed=1).requires_grad_()
    (compiler.jit(times_detached_self)(x) * 1).sum().backward()
    torch.testing.assert_close(x.grad, x.detach())


def test_nothing_requires_grad_after_detach():
    def fn(x):
        d = x.detach()
        return d * 2, d

    x = randn(3, 4).requires_grad_()
    doubled, detached = compiler.jit(fn)(x)
    assert not doubled.requires_grad and not detached.requires_grad
    assert detached is not x and detached.data_ptr() == x.data_ptr()  # a view, as eager's detach
    torch.testing.assert_close(doubled, x.detach() * 2)
    with pytest.raises(RuntimeError, match="does not require grad"):
        doubled.sum().backward()


def test_writing_through_a_detached_view_updates_the_input():
    def fn(x):
        x.detach().mul_(2)
        return x + 1

    x = randn(5)
    expected = x * 2
    out = compiler.jit(fn)(x)
    torch.testing.assert_close(x, expected)
    torch.testing.assert_close(out, expected + 1)


def test_a_detached_shift_leaves_softmax_gradients_unchanged():
    def shifted_log_softmax(x):
        return F.log_softmax(x - x.amax(-1, keepdim=True).detach(), -1)

    for seed in SEEDS:
        check_gradients(shifted_log_softmax, [randn(3, 9, seed=seed) * 5], seed=seed)
