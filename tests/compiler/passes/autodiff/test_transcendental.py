"""Gradients of log2, log10, tan, sinh, cosh, asinh, acosh, atanh and erfc (prims of their own, their
rules in compiler/passes/vjp_rules.py) and of logaddexp2 (compiler/ops/special.py) against eager
autograd: random inputs over 3 seeds in float32 and bfloat16 (broadcasting, size-1 dims and
non-contiguous inputs included), and the special points (the ends of the domains, zeros,
infinities, NaN) in float64, where values and gradients must be eager's, NaN included."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch

import compiler
from tests.compiler.passes.autodiff.test_joint import DTYPES, randn
from tests.support.autodiff_util import check_gradients, check_special_points
from tests.support.autodiff_util import float64 as _t

SEEDS = range(3)
_INF, _NAN = math.inf, math.nan


def _between(low: float, high: float, *shape: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    """Values spread over (low, high) (through a sigmoid of normal draws), in `dtype`."""
    return (low + (high - low) * torch.sigmoid(randn(*shape, seed=seed) * 2)).to(dtype)


# name -> (function, makes its arguments from a seed and a dtype)
CASES: dict[str, tuple[Callable, Callable[[int, torch.dtype], list]]] = {
    "log2": (torch.log2, lambda s, d: [_between(0.05, 10, 4, 6, dtype=d, seed=s)]),
    "log10": (lambda x: x.log10() * 2, lambda s, d: [_between(0.05, 10, 4, 1, 6, dtype=d, seed=s)]),
    "tan": (torch.tan, lambda s, d: [_between(-1.4, 1.4, 4, 6, dtype=d, seed=s)]),
    "sinh": (torch.sinh, lambda s, d: [randn(4, 6, dtype=d, seed=s) * 2]),
    "cosh": (lambda x: x.cosh(), lambda s, d: [randn(4, 6, dtype=d, seed=s).mT * 2]),
    "asinh": (torch.arcsinh, lambda s, d: [randn(4, 6, dtype=d, seed=s) * 5]),
    "acosh": (torch.acosh, lambda s, d: [_between(1.05, 20, 4, 6, dtype=d, seed=s)]),
    "atanh": (lambda x: x.arctanh(), lambda s, d: [_between(-0.95, 0.95, 4, 6, dtype=d, seed=s)[:, ::2]]),
    "erfc": (torch.special.erfc, lambda s, d: [randn(4, 6, dtype=d, seed=s) * 2]),
    "chain": (
        lambda x, y: torch.log2(torch.cosh(x) + y.erfc()) * torch.tan(x * 0.5),
        lambda s, d: [randn(3, 1, 5, dtype=d, seed=s), randn(4, 1, dtype=d, seed=s + 7)],
    ),
    "logaddexp2": (torch.logaddexp2, lambda s, d: [randn(3, 5, dtype=d, seed=s) * 4, randn(3, 5, dtype=d, seed=s + 7)]),
    "logaddexp2_broadcast": (
        lambda a, b: a.logaddexp2(b),
        lambda s, d: [randn(2, 1, 16, dtype=d, seed=s) * 40, randn(4, 1, dtype=d, seed=s + 7) * 40],
    ),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(CASES))
def test_gradients_match_eager(name: str, dtype: torch.dtype) -> None:
    fn, make = CASES[name]
    for seed in SEEDS:
        check_gradients(fn, make(seed, dtype), seed=seed)


def test_logaddexp2_gradient_of_equal_operands() -> None:
    """Equal operands share the gradient in halves, as in eager."""
    a = torch.tensor([0.0, 1.0, -2.0, 50.0])
    check_gradients(torch.logaddexp2, [a, a.clone()])


_EVERYWHERE = _t(0, -0.0, 1, -1, 0.5, -3, 1e-300, 700, -800, 1e200, _INF, -_INF, _NAN)
# name -> (function, arguments at its special points): values and gradients must be eager's, NaN included.
EDGES: dict[str, tuple[Callable, list[torch.Tensor]]] = {
    "log2": (torch.log2, [_t(0, -0.0, 1, 2, 8, 0.5, 1e-300, -1, 1e300, _INF, -_INF, _NAN)]),
    "log10": (torch.log10, [_t(0, -0.0, 1, 10, 1000, 0.001, 1e-300, -1, 1e300, _INF, -_INF, _NAN)]),
    "tan": (torch.tan, [_t(0, -0.0, math.pi / 2, -math.pi / 2, math.pi, 1e-300, 1e30, _INF, -_INF, _NAN)]),
    "sinh": (torch.sinh, [_EVERYWHERE]),
    "cosh": (torch.cosh, [_EVERYWHERE]),
    "asinh": (torch.asinh, [_t(0, -0.0, 1, -1, 1e-300, 1e200, -1e200, 1e300, _INF, -_INF, _NAN)]),
    "acosh": (torch.acosh, [_t(1, 1 + 1e-12, 1.5, 0.5, 0, -1, 1e200, 1e300, _INF, -_INF, _NAN)]),
    "atanh": (torch.atanh, [_t(-1, 1, 0, -0.0, 1 - 1e-12, -1 + 1e-12, 0.5, 1.5, -2, _INF, _NAN)]),
    "erfc": (torch.erfc, [_EVERYWHERE]),
    "logaddexp2": (
        torch.logaddexp2,
        [_t(0, 0, 1, 100, -100, 1e300, -1e300, _INF, 0, 5), _t(-60, 0, 1, -100, 100, 1e300, -1e300, 0, -_INF, _NAN)],
    ),
}


@pytest.mark.parametrize("name", sorted(EDGES))
def test_values_and_gradients_at_special_points_match_eager(name: str) -> None:
    check_special_points(*EDGES[name])


def test_logaddexp2_of_equal_infinities_is_that_infinity() -> None:
    """As in eager, logaddexp2(inf, inf) = inf and logaddexp2(-inf, -inf) = -inf (inf - inf is not taken)."""
    a, b = _t(_INF, -_INF, _INF, -_INF), _t(_INF, -_INF, -_INF, _INF)
    torch.testing.assert_close(compiler.jit(torch.logaddexp2)(a, b), torch.logaddexp2(a, b))
    torch.testing.assert_close(torch.logaddexp2(a, b), _t(_INF, -_INF, _INF, _INF))
