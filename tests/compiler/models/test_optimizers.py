"""torch.optim's own step implementations (`torch.optim.adam.adam`, `adamw`, `sgd`, single-tensor and
foreach) traced by `compiler.jit`: several steps on random gradients match eager, state included.

`capturable=True` keeps `step` a tensor all the way (the bias corrections are tensor math);
`capturable=False` is the path where eager reads `step` as a number (`.item()`, float64 math where
the trace keeps float32 tensors: hence float32 tolerances, not exact equality). Eager refuses
capturable on CPU, so that reference runs torch's same code with `torch.compiler.is_compiling()`
set, which only skips the device check.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable

import pytest
import torch
from torch.optim.adam import adam
from torch.optim.adamw import adamw
from torch.optim.sgd import sgd

import compiler
from compiler.tracing import frontend

SHAPES = [(4, 3), (5,), ()]
STEPS = 3


def _state(seed: int, count: int) -> dict[str, list[torch.Tensor]]:
    torch.manual_seed(seed)
    params = [torch.randn(SHAPES[i % len(SHAPES)]) for i in range(count)]
    return {
        "params": params,
        "exp_avgs": [torch.zeros_like(p) for p in params],
        "exp_avg_sqs": [torch.zeros_like(p) for p in params],
        "max_exp_avg_sqs": [torch.zeros_like(p) for p in params],
        "state_steps": [torch.tensor(0.0) for _ in params],
        "momentum_buffers": [torch.randn_like(p) for p in params],
    }


def _gradients(seed: int, params: list[torch.Tensor]) -> list[list[torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed + 100)
    return [[torch.randn(p.shape, generator=generator) for p in params] for _ in range(STEPS)]


def _clone(state: dict[str, list[torch.Tensor]]) -> dict[str, list[torch.Tensor]]:
    return {k: [t.clone() for t in v] for k, v in state.items()}


def _assert_states_match(got: dict, want: dict) -> None:
    for key in want:
        for i, (g, w) in enumerate(zip(got[key], want[key])):
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6, msg=lambda m, key=key, i=i: f"{key}[{i}]: {m}")


def _run_both(step: Callable, seed: int, count: int, capturable: bool) -> None:
    """Runs `step(grads, **state)` eagerly and jitted for STEPS steps; compares the states."""
    eager, jitted = _state(seed, count), _state(seed, count)
    jstep = compiler.jit(step)
    for grads in _gradients(seed, eager["params"]):
        with frontend.compiling() if capturable else contextlib.nullcontext():  # as torch.compile runs it
            step([g.clone() for g in grads], **eager)
        jstep([g.clone() for g in grads], **jitted)
    _assert_states_match(jitted, eager)
    assert compiler.cache_stats(jstep).misses == 1


ADAM_CASES = [
    dict(foreach=f, capturable=c, amsgrad=a, maximize=m, weight_decay=w)
    for f, c, a, m, w in itertools.product((False, True), (False, True), (False, True), (False, True), (0.0, 0.01))
    if not (a and m)  # amsgrad and maximize are independent; their combination adds no coverage
]


def _id(case: dict) -> str:
    return "-".join(f"{k}={v}" for k, v in case.items())


@pytest.mark.parametrize("adam_fn", [adam, adamw], ids=["adam", "adamw"])
@pytest.mark.parametrize("case", ADAM_CASES, ids=_id)
def test_adam_steps_match_eager(adam_fn: Callable, case: dict) -> None:
    def step(grads, params, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, momentum_buffers):
        adam_fn(
            params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps,
            foreach=case["foreach"], capturable=case["capturable"], amsgrad=case["amsgrad"],
            maximize=case["maximize"], weight_decay=case["weight_decay"],
            beta1=0.9, beta2=0.999, lr=1e-2, eps=1e-8,
        )  # fmt: skip

    _run_both(step, seed=len(_id(case)), count=3, capturable=case["capturable"])


SGD_CASES = [
    dict(foreach=f, momentum=mo, nesterov=n, dampening=d, maximize=m, weight_decay=w)
    for f, mo, n, d, m, w in itertools.product(
        (False, True), (0.0, 0.9), (False, True), (0.0, 0.1), (False, True), (0.0, 0.01)
    )
    if not (n and (mo == 0.0 or d != 0.0))  # nesterov needs momentum and no dampening (torch checks)
]


@pytest.mark.parametrize("case", SGD_CASES, ids=_id)
def test_sgd_steps_match_eager(case: dict) -> None:
    def step(grads, params, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, momentum_buffers):
        buffers = momentum_buffers if case["momentum"] else [None] * len(params)
        sgd(
            params, grads, buffers,
            foreach=case["foreach"], momentum=case["momentum"], nesterov=case["nesterov"],
            dampening=case["dampening"], maximize=case["maximize"], weight_decay=case["weight_decay"], lr=0.1,
        )  # fmt: skip

    _run_both(step, seed=len(_id(case)), count=3, capturable=False)


@pytest.mark.parametrize("foreach", [False, True])
def test_sgd_first_step_creates_momentum_buffers_like_eager(foreach: bool) -> None:
    def step(params, grads):
        buffers = [None] * len(params)
        sgd(params, grads, buffers, foreach=foreach, momentum=0.9, nesterov=True, dampening=0.0, lr=0.1,
            weight_decay=0.0, maximize=False)  # fmt: skip
        return buffers

    torch.manual_seed(0)
    params, grads = [torch.randn(3, 2), torch.randn(4)], [torch.randn(3, 2), torch.randn(4)]
    eager_params = [p.clone() for p in params]
    eager_grads = [g.clone() for g in grads]  # the foreach step adds into the gradients
    want = step(eager_params, eager_grads)
    got = compiler.jit(step)(params, grads)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close((params, grads), (eager_params, eager_grads))


def test_foreach_ops_broadcast_their_arguments_like_torch() -> None:
    def fn(xs, ys, scalars):
        a = torch._foreach_add(xs, ys, alpha=2)
        b = torch._foreach_mul(xs, [2.0, 3.0])
        c = torch._foreach_pow(0.5, xs)
        torch._foreach_addcdiv_(xs, ys, ys, scalars)
        torch._foreach_lerp_(ys, xs, 0.25)
        return a, b, c

    torch.manual_seed(0)
    xs, ys = [torch.randn(3), torch.randn(2, 2)], [torch.randn(3), torch.randn(2, 2)]
    scalars = torch.tensor([0.5, -2.0])
    exs, eys = [x.clone() for x in xs], [y.clone() for y in ys]
    want = fn(exs, eys, scalars)
    got = compiler.jit(fn)(xs, ys, scalars)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close((xs, ys), (exs, eys))


def test_real_conj_is_the_tensor_itself_and_complex_is_refused() -> None:
    def fn(x):
        assert not torch.is_complex(x) and x.is_floating_point()
        return x.conj() + 1

    x = torch.randn(3)
    torch.testing.assert_close(compiler.jit(fn)(x), x + 1)
