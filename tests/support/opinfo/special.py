"""Op cases: atan2, erfinv, hypot, logit, xlogy and expm1 (compiler/ops/special.py), with their special points."""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch

from tests.support.opinfo.elementwise import binary_samples, unary_samples
from tests.support.opinfo.samples import ALL, FLOATS, Maker, OpCase, Sample, method

_INF, _NAN = math.inf, math.nan


def _pair(make: Maker, pairs: list[tuple[float, float]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Two 1-d tensors of the dtype under test holding the pairs' first and second values."""
    first, second = zip(*pairs)
    return torch.tensor(first, dtype=make.dtype), torch.tensor(second, dtype=make.dtype)


# Signed zeros, infinities and NaN against each other and against ordinary values.
_SPECIAL_PAIRS = [
    (0.0, 0.0), (0.0, -0.0), (-0.0, 0.0), (-0.0, -0.0), (0.0, -2.0), (-0.0, -2.0), (1.5, 0.0), (-1.5, -0.0),
    (_INF, 1.0), (-_INF, 1.0), (1.0, _INF), (1.0, -_INF), (_INF, _INF), (-_INF, -_INF), (_INF, -_INF),
    (_NAN, 1.0), (1.0, _NAN), (_NAN, _INF), (_INF, _NAN), (1e30, 1e30), (-3e-30, 4e-30),
]  # fmt: skip


def _atan2_samples(make: Maker) -> Iterator[Sample]:
    yield from binary_samples(make, scalars=False)  # eager's atan2 takes no Python number
    yield Sample((make(3, 4, transposed=True), make(3, 4, noncontiguous=True)))
    if make.is_float:
        yield Sample(_pair(make, _SPECIAL_PAIRS))
    else:
        yield Sample((make.small_values(4, 5), make.small_values(4, 5)))  # zeros against zeros


def _hypot_samples(make: Maker) -> Iterator[Sample]:
    yield from binary_samples(make, scalars=False)
    yield Sample(_pair(make, _SPECIAL_PAIRS))
    yield Sample((make(3, 4, low=-1e3, high=1e3), make(1, 4, low=-1e-3, high=1e-3)))


def _erfinv_samples(make: Maker) -> Iterator[Sample]:
    if make.is_float:
        yield from unary_samples(make, -1, 1)
        yield Sample(
            (torch.tensor([-1.0, 1.0, -0.0, 0.0, 0.999, -0.9999, 1e-6, 1.5, -2.0, _INF, _NAN], dtype=make.dtype),)
        )
    else:
        yield from unary_samples(make, -1, 2)  # -1, 0, 1: -inf, 0, inf
        yield Sample((make(3, 4),))  # outside [-1, 1]: NaN


def _logit_samples(make: Maker) -> Iterator[Sample]:
    if make.is_float:
        yield from unary_samples(make, 0, 1)
        edges = torch.tensor([0.0, 1.0, 0.5, 1e-6, 1 - 1e-3, -0.5, 1.5, _INF, -_INF, _NAN], dtype=make.dtype)
        yield Sample((edges,))
        for eps in (1e-6, 0.2, 0.0, 0.7, -1.0):  # 0.7: the bounds cross; a negative eps clamps nothing
            yield Sample((edges,), {"eps": eps})
        yield Sample((make(3, 4, transposed=True, low=0, high=1), 0.25))  # eps positionally
        yield Sample((make(2, 5, noncontiguous=True, low=0, high=1),), {"eps": 0.1})
    else:
        yield from unary_samples(make, 0, 2)  # 0 and 1: -inf, inf
        yield Sample((make(3, 4),))
        yield Sample((make(3, 4, low=-2, high=3),), {"eps": 0.25})


def _xlogy_samples(make: Maker) -> Iterator[Sample]:
    m = make if make.is_float else make.small_values
    yield Sample((m(5, 7), make(5, 7, low=0, high=5)))
    yield Sample((m(4, 1, 3), make(5, 3, noncontiguous=True, low=0, high=5)))
    yield Sample((m(3, 4).mT, make(3, low=0, high=5)))
    yield Sample((m(1, 6), make(3, 1, low=0, high=5)))
    yield Sample((m(2, 3), make(low=0, high=5)))
    yield Sample((m(2, 3), make(3, dtype=torch.float64, low=0, high=5)))  # promotion
    yield Sample((m(3, 4), 2))  # Python numbers on either side
    yield Sample((m(3, 4), 0.5))
    yield Sample((m(3, 4), make(3, 4)))  # negative other: NaN unless input is 0
    if make.is_float:
        x, y = _pair(make, [(0.0, 0.0), (0.0, _INF), (0.0, _NAN), (1.0, _NAN), (_NAN, 1.0), (-0.0, 2.0), (0.0, -1.0)])
        yield Sample((x, y))
        yield Sample((torch.zeros(4, dtype=make.dtype), 0.0))
        yield Sample((torch.tensor([0.0, 2.0, 0.0], dtype=make.dtype), _NAN))


def _xlogy_number_input_samples(make: Maker) -> Iterator[Sample]:
    """A Python number as `input` (the functions take one, Tensor.xlogy has no such spelling)."""
    yield Sample((0.0, make(3, 4, low=0, high=5)))
    yield Sample((1.5, make(3, 4, low=0, high=5)))
    yield Sample((2, make(2, 3, noncontiguous=True)))


def _expm1_samples(make: Maker) -> Iterator[Sample]:
    if make.is_float:
        # tiny values (exp(x) - 1 would lose them), both sides of the branch at 0.5, overflow, infinities
        points = [0.0, -0.0, 1e-10, -3e-8, 1e-4, 0.49, -0.5, 0.5, 0.51, 3.0, -20.0, 100.0, -100.0, _INF, -_INF, _NAN]
        yield Sample((torch.tensor(points, dtype=make.dtype),))
    yield Sample((make(5, 7, low=-3, high=3),))
    yield Sample((make(4, 6, noncontiguous=True, low=-1, high=1),))
    yield Sample((make(3, 4, transposed=True),))
    yield Sample((make(),))


CASES = [
    OpCase("expm1", (torch.expm1, method("expm1"), torch.special.expm1), _expm1_samples, ALL),
    OpCase("atan2", (torch.atan2, method("atan2"), torch.arctan2, method("arctan2")), _atan2_samples, ALL),
    OpCase("erfinv", (torch.erfinv, method("erfinv"), torch.special.erfinv), _erfinv_samples, ALL),
    OpCase("hypot", (torch.hypot, method("hypot")), _hypot_samples, FLOATS),
    OpCase("logit", (torch.logit, method("logit"), torch.special.logit), _logit_samples, ALL),
    OpCase("xlogy", (torch.xlogy, method("xlogy"), torch.special.xlogy), _xlogy_samples, ALL),
    OpCase("xlogy_number_input", (torch.xlogy, torch.special.xlogy), _xlogy_number_input_samples, ALL),
]
