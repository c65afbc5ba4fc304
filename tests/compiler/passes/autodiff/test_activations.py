"""Gradients of softplus, logsigmoid, mish, glu and logaddexp against eager autograd, f32 and bf16;
those of the piecewise activations at their kinks, and of the clipping ones (leaky_relu, hardtanh,
relu6, threshold) at their boundaries and at NaN."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

import compiler
from tests.compiler.passes.autodiff.test_joint import DTYPES, randn
from tests.support.autodiff_util import check_gradients

SEEDS = range(3)
SHAPES = [(3, 6), (2, 4, 16)]  # even at both ends: glu halves the first or last dim


def softplus_beta(x: torch.Tensor) -> torch.Tensor:
    """beta * x crosses the threshold for some of the values of randn * 4."""
    return F.softplus(x * 4, beta=2.0, threshold=3.0)


def logsigmoid(x: torch.Tensor) -> torch.Tensor:
    """F.logsigmoid under its own name (the builtin's __name__ is log_sigmoid)."""
    return F.logsigmoid(x)


def glu_first_dim(x: torch.Tensor) -> torch.Tensor:
    return F.glu(x.transpose(0, -1), dim=0)


UNARY: list[Callable] = [F.softplus, softplus_beta, logsigmoid, F.mish, F.glu, glu_first_dim]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("fn", UNARY, ids=lambda f: f.__name__)
def test_unary_activation_gradients(fn: Callable, shape: tuple, dtype: torch.dtype) -> None:
    for seed in SEEDS:
        check_gradients(fn, [randn(*shape, dtype=dtype, seed=seed) * 3], seed=seed)


@pytest.mark.parametrize("fn", [F.softplus, softplus_beta, logsigmoid, F.mish], ids=lambda f: f.__name__)
def test_gradients_in_the_tails(fn: Callable) -> None:
    """Where exp would overflow, the gradient stays finite and matches eager."""
    # 20 and 0.375 reach the thresholds of softplus and softplus_beta exactly
    x = torch.tensor([-100.0, -30.0, -5.0, 0.0, 0.375, 0.5, 19.0, 20.0, 21.0, 30.0, 100.0])
    check_gradients(fn, [x])


def celu_alpha_2(x: torch.Tensor) -> torch.Tensor:
    return F.celu(x, alpha=2.0)


@pytest.mark.parametrize(
    "fn", [F.hardsigmoid, F.hardswish, F.elu, F.celu, celu_alpha_2, F.selu], ids=lambda f: f.__name__
)
def test_gradients_at_the_kinks(fn: Callable) -> None:
    """At -3, 0 and 3 exactly the gradient is eager's (a where, not a tie of minimum/maximum, picks it)."""
    x = torch.tensor([-100.0, -4.0, -3.0, -1.5, 0.0, 1.5, 3.0, 4.0, 100.0])
    check_gradients(fn, [x])


def test_logaddexp_gradient_of_equal_operands() -> None:
    """Equal operands share the gradient in halves, as in eager."""
    a = torch.tensor([0.0, 1.0, -2.0, 50.0])
    check_gradients(torch.logaddexp, [a, a.clone()])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(("a_shape", "b_shape"), [((3, 5), (3, 5)), ((2, 1, 16), (4, 1))], ids=str)
def test_logaddexp_gradients(a_shape: tuple, b_shape: tuple, dtype: torch.dtype) -> None:
    for seed in SEEDS:
        a = randn(*a_shape, dtype=dtype, seed=seed) * 3
        b = randn(*b_shape, dtype=dtype, seed=seed + 10) * 3
        check_gradients(torch.logaddexp, [a, b], seed=seed)
        check_gradients(lambda a, b: a.logaddexp(b), [a, b], seed=seed)


def leaky_relu_slope_2(x: torch.Tensor) -> torch.Tensor:
    return F.leaky_relu(x, 0.2)


def hardtanh_wide(x: torch.Tensor) -> torch.Tensor:
    return F.hardtanh(x, -2.0, 3.0)


def threshold_above_value(x: torch.Tensor) -> torch.Tensor:
    """The fill value 3 is above the threshold 1: the gradient follows x, not the result."""
    return F.threshold(x, 1.0, 3.0)


def threshold_at_zero(x: torch.Tensor) -> torch.Tensor:
    return torch.threshold(x, 0.0, -0.5)


def clamp_both(x: torch.Tensor) -> torch.Tensor:
    """Unlike hardtanh's, clamp's gradient is x's at both bounds."""
    return x.clamp(-2.0, 3.0)


def clamp_min(x: torch.Tensor) -> torch.Tensor:
    return torch.clamp(x, min=0.0)


def clamp_max(x: torch.Tensor) -> torch.Tensor:
    return x.clamp_max(1.0)


CLIPPING: list[Callable] = [
    F.leaky_relu,
    leaky_relu_slope_2,
    F.hardtanh,
    hardtanh_wide,
    F.relu6,
    threshold_above_value,
    threshold_at_zero,
    clamp_both,
    clamp_min,
    clamp_max,
]
# Every boundary of CLIPPING's functions, exactly, and values on either side.
BOUNDARIES = torch.tensor([-100.0, -3.0, -2.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0, 5.0, 6.0, 7.0, 100.0])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("fn", CLIPPING, ids=lambda f: f.__name__)
def test_clipping_activation_gradients_with_boundary_points(fn: Callable, dtype: torch.dtype) -> None:
    """At each boundary exactly the gradient is eager's: leaky_relu's slope at 0, hardtanh's and
    relu6's 0 at both bounds, threshold's 0 at the threshold, clamp's 1 at both bounds."""
    for seed in SEEDS:
        x = randn(4, len(BOUNDARIES), dtype=dtype, seed=seed) * 4
        x[seed] = BOUNDARIES.to(dtype)
        check_gradients(fn, [x], seed=seed)


@pytest.mark.parametrize("fn", CLIPPING, ids=lambda f: f.__name__)
def test_clipping_activation_gradient_of_nan_is_eager_s(fn: Callable) -> None:
    """NaN stays NaN; its gradient is x's (hardtanh, relu6, threshold) or the slope (leaky_relu)."""
    x = torch.tensor([float("nan"), -1.0, 0.0, 2.0, float("nan")])
    grads = []
    for call in (fn, compiler.jit(fn)):
        leaf = x.clone().requires_grad_()
        y = call(leaf)
        grads.append((y, *torch.autograd.grad(y, leaf, torch.arange(1.0, 6.0))))
    for got, want in zip(grads[1], grads[0], strict=True):
        torch.testing.assert_close(got, want, equal_nan=True)


def test_clamp_between_tensor_bounds_gives_each_its_gradient_as_eager() -> None:
    """x at a bound keeps the gradient; the bounds get it where x is beyond them; a bound above the
    other gives the upper one."""
    x = torch.tensor([-1.0, 0.0, 0.5, 1.0, 2.0, 0.7])
    low, high = torch.tensor([0.0, 0.0, 0.0, 0.0, 0.0, 0.9]), torch.tensor([1.0, 1.0, 1.0, 1.0, 1.0, 0.2])
    check_gradients(torch.clamp, [x, low, high])
