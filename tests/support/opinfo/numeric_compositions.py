"""Op cases: the ops of compiler/ops/numeric_compositions.py (round, frac, copysign, isclose, nansum,
signbit, float_power, heaviside),
median and kthvalue, and the cast methods byte/char/short and cpu."""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch

from tests.support.opinfo.samples import ALL, FLOATS, Maker, OpCase, Sample, method, named


def _round_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(4, 5, low=-30, high=30),))
    yield Sample((torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, 0.49999997, -2.5000002]).to(make.dtype),))
    if make.is_float:
        yield Sample((make(3, 4, noncontiguous=True),), {"decimals": 2})
        yield Sample((make(3, 4, low=-500, high=500),), {"decimals": -1})


def _copysign_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(4, 5), make(4, 5)))
    yield Sample((make(4, 5), make(5, transposed=False)))
    yield Sample((make(3), torch.tensor([-0.0, 0.0, -2.0])))
    yield Sample((make(3), -0.0))


def _isclose_samples(make: Maker) -> Iterator[Sample]:
    x = make(4, 5)
    yield Sample((x, x + make.small_values(4, 5) * 1e-6))
    yield Sample((make(4, 5), make(4, 5)), {"atol": 1.0})
    yield Sample((torch.tensor([float("nan"), 1.0, float("inf")]), torch.tensor([float("nan"), 1.0, float("inf")])))
    yield Sample(
        (torch.tensor([float("nan"), 1.0]), torch.tensor([float("nan"), 1.1])), {"equal_nan": True, "rtol": 0.2}
    )


def _nansum_samples(make: Maker) -> Iterator[Sample]:
    x = make(4, 5)
    if make.is_float:
        x[1, 2] = float("nan")
    yield Sample((x,))
    yield Sample((x, 1))
    yield Sample((x, (0, 1), True))


def _nanmean_samples(make: Maker) -> Iterator[Sample]:
    x = make(4, 5)
    x[1, 2], x[3] = float("nan"), float("nan")  # a row all NaN: its mean is NaN
    yield Sample((x,))
    yield Sample((x, 1))
    yield Sample((x, (0, 1), True))
    yield Sample((make(3, 6, transposed=True), 0))


def _median_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(4, 5),))
    yield Sample((make(4, 5, noncontiguous=True), 1))
    yield Sample((make(3, 6, transposed=True), 0, True))


def _kthvalue_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(4, 5), 2))
    yield Sample((make(4, 5, noncontiguous=True), 4, 0, True))


def _signbit_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(4, 5),))
    yield Sample((make(3, 4, transposed=True),))
    if make.is_float:
        points = [-0.0, 0.0, 1.0, -2.0, math.inf, -math.inf, 1e-30, -1e-30]
        yield Sample((torch.tensor(points, dtype=make.dtype),))


def _float_power_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(4, 5, low=0.1, high=3), make(4, 5, low=-2, high=2)))
    yield Sample((make(3, 1, low=0.5, high=2, noncontiguous=True), make(4, low=0, high=3)))  # broadcast
    yield Sample((make(2, 3, low=-3, high=3), 2))
    yield Sample((make(2, 3, low=0, high=3), -1.5))
    yield Sample((make(2, 3, low=0, high=3), torch.tensor(1.5)))


def _heaviside_samples(make: Maker) -> Iterator[Sample]:
    x = make.small_values(4, 5)
    yield Sample((x, make(4, 5)))
    yield Sample((x, make(5)))  # broadcast
    yield Sample((make.small_values(3, 4, transposed=True), make(1)))
    if make.is_float:
        yield Sample((torch.tensor([0.0, -0.0, math.nan, -math.inf, 2.0], dtype=make.dtype), make()))


def _casts(x: torch.Tensor) -> tuple:
    return x.byte(), x.char(), x.short(), x.cpu() * 2


CASES = [
    OpCase("round", (torch.round, method("round")), _round_samples, ALL),
    OpCase("special.round", (torch.special.round,), _round_samples, FLOATS),
    OpCase("frac", (torch.frac, method("frac")), lambda make: [Sample((make(4, 5, low=-9, high=9),))], FLOATS),
    OpCase("copysign", (torch.copysign, method("copysign")), _copysign_samples, FLOATS),
    OpCase("isclose", (torch.isclose, method("isclose")), _isclose_samples, (torch.float32,)),
    OpCase("nansum", (torch.nansum, method("nansum")), _nansum_samples, ALL),
    OpCase("nanmean", (torch.nanmean, method("nanmean")), _nanmean_samples, FLOATS),
    # NOTE: values only where ties are possible (integers): which tied index eager reports is unspecified
    OpCase(
        "median",
        (named("median values", lambda *a: torch.median(*a)[0] if len(a) > 1 else torch.median(*a)),),
        _median_samples,
        ALL,
    ),
    OpCase("median_method", (method("median"),), _median_samples, FLOATS),
    OpCase("kthvalue", (torch.kthvalue, method("kthvalue")), _kthvalue_samples, FLOATS),
    OpCase("signbit", (torch.signbit, method("signbit")), _signbit_samples, (*ALL, torch.bool)),
    OpCase("float_power", (torch.float_power, method("float_power")), _float_power_samples, ALL),
    OpCase(
        "float_power_of_number",
        (torch.float_power,),
        lambda make: [Sample((2.5, make(3, 2, low=-2, high=2, transposed=True)))],
        ALL,
    ),
    OpCase("heaviside", (torch.heaviside, method("heaviside")), _heaviside_samples, ALL),
    OpCase("byte_char_short_cpu", (named("casts", _casts),), lambda make: [Sample((make(3, 4, low=0, high=9),))], ALL),
]
