"""Op cases: acos, asin and atan (compiler/ops/inverse_trig.py), with their end points and values
outside the domain."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import torch

from tests.support.opinfo.elementwise import unary_samples
from tests.support.opinfo.samples import ALL, Maker, OpCase, Sample, method


def _samples(low: float, high: float) -> Callable[[Maker], Iterator[Sample]]:
    def samples(make: Maker) -> Iterator[Sample]:
        if make.is_float:
            yield from unary_samples(make, low, high)
            points = [-1.0, 1.0, -0.0, 0.0, 0.999, -0.999, 1e-7, 1.5, -2.0, 1e30, math.inf, -math.inf, math.nan]
            yield Sample((torch.tensor(points, dtype=make.dtype),))
        yield Sample((make(3, 4),))  # integers and bool give the default float dtype; floats outside [-1, 1]

    return samples


CASES = [
    OpCase("acos", (torch.acos, method("acos"), torch.arccos, method("arccos")), _samples(-1, 1), ALL),
    OpCase("asin", (torch.asin, method("asin"), torch.arcsin, method("arcsin")), _samples(-1, 1), ALL),
    OpCase("atan", (torch.atan, method("atan"), torch.arctan, method("arctan")), _samples(-10, 10), ALL),
]
