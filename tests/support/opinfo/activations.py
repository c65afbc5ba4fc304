"""Op cases: the clipping activations leaky_relu, hardtanh, relu6 and threshold (integers where eager
takes them), with values exactly at their boundaries, the infinities and NaN."""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F

from tests.support.opinfo.elementwise import _activation_samples, _edges, _inplace_false
from tests.support.opinfo.samples import ALL, FLOATS, Maker, OpCase, Sample

_INF, _NAN = float("inf"), float("nan")


def _at(make: Maker, *values: float) -> torch.Tensor:
    """`values`, and for floats the infinities and NaN, then random values (`_edges`); integers keep
    the integral values only."""
    if make.is_float:
        return _edges(make, *values, _INF, -_INF, _NAN)
    return _edges(make, *(v for v in values if v == int(v)))


def _leaky_relu_samples(make: Maker) -> Iterator[Sample]:
    yield from _activation_samples(make)
    yield Sample((_at(make, -100, -1, 0, 1, 100),))
    yield Sample((make(3, 4, transposed=True), 0.2))
    yield Sample((_at(make, -2, 0, 2),), {"negative_slope": 0.0})  # -inf * 0 is NaN, as in eager
    yield Sample((make(4, 1, 3, noncontiguous=True),), {"negative_slope": -0.5})


def _hardtanh_samples(make: Maker) -> Iterator[Sample]:
    yield from _activation_samples(make)
    yield Sample((make.small_values(4, 6),))  # ties at -1 and 1
    yield Sample((_at(make, -2, -1, -0.5, 0, 1, 2),))
    yield Sample((_at(make, -2.5, -2, 3.5, 4), -2.5, 3.5))
    yield Sample((make(4, 1, 3, noncontiguous=True),), {"min_val": -1.5, "max_val": 2.5})  # integers: [-1, 2]
    yield Sample((_at(make, 0, 1, 2),), {"min_val": 1.0, "max_val": 1.0})
    if make.is_float:
        yield Sample((_at(make, 0, 1),), {"min_val": _NAN})  # eager clamps: every value NaN


def _relu6_samples(make: Maker) -> Iterator[Sample]:
    yield from _activation_samples(make)
    yield Sample((_at(make, -1, 0, 3, 6, 7),))
    yield Sample((make.small_values(3, 5) * 3,))  # ties at 0 and 6


def _threshold_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(5, 7), 0.5, -2.0))
    yield Sample((make(4, 1, 3, noncontiguous=True), -1.5, -5.5))  # integers truncate both: -1 and -5
    yield Sample((make(3, 6, transposed=True), 0, 3))
    yield Sample((make(), 0.1, 20))
    yield Sample((make(0, 3), 0.1, 20))
    yield Sample((make.small_values(4, 6), 1, 2))  # ties at the threshold
    yield Sample((_at(make, -1, 0, 0.5, 1, 2), 0.5, -2.0))
    yield Sample((make(2, 5), 1), {"value": 7})
    if make.is_float:
        yield Sample((_at(make, -1, 0, 1), 1.0, _NAN))
        yield Sample((_at(make, 0, 1), _NAN, 2.0))  # nothing is <= NaN: x everywhere
        # NOTE: bfloat16 compares with the threshold in float32, as eager (1.0078125 > 1.005)
        yield Sample((_at(make, 0.9921875, 1.0, 1.0078125), 1.005, 0.0))


CASES = [
    OpCase("leaky_relu", (F.leaky_relu, _inplace_false(F.leaky_relu)), _leaky_relu_samples, FLOATS),
    OpCase("hardtanh", (F.hardtanh, _inplace_false(F.hardtanh)), _hardtanh_samples, ALL),
    OpCase("relu6", (F.relu6, _inplace_false(F.relu6)), _relu6_samples, ALL),
    OpCase("threshold", (F.threshold, torch.threshold, _inplace_false(F.threshold)), _threshold_samples, ALL),
]
