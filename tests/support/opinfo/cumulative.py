"""Op cases: the ops of compiler/ops/cumulative.py (cummax, cummin, logcumsumexp, bincount), with
ties, NaN, infinities, 0-d and size-1 inputs and non-contiguous ones."""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch

from tests.support.opinfo.samples import ALL, FLOATS, Maker, OpCase, Sample, method


def _running_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(4, 7), 1))
    yield Sample((make.small_values(5, 9), 0))  # ties: the latest index
    yield Sample((make(3, 6, transposed=True), -1))
    yield Sample((make(2, 1, 5, noncontiguous=True), 1))
    yield Sample((make(17), 0))  # not a power of two
    yield Sample((make(), 0))
    if make.is_float:
        with_nan = make.small_values(3, 8)
        with_nan[0, 2] = with_nan[1, 5] = with_nan[1, 7] = math.nan
        with_nan[2, 3] = math.inf
        yield Sample((with_nan, 1))


def _logcumsumexp_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(4, 7), 1))
    yield Sample((make(3, 6, transposed=True, low=-90, high=90), 0))
    yield Sample((make(2, 1, 5, noncontiguous=True), -1))
    yield Sample((make(), 0))
    spread = torch.tensor([-1000.0, 0.0, -math.inf, 1000.0, -5.0, math.inf, 3.0], dtype=make.dtype)
    yield Sample((spread, 0))  # terms a single shift by the maximum would underflow
    yield Sample((torch.tensor([[-math.inf, -math.inf, 2.0], [1.0, math.nan, 0.0]], dtype=make.dtype), 1))


def _bincount_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((torch.randint(0, 6, (20,)),), {"minlength": 6})
    yield Sample((torch.randint(0, 3, (9,)),), {"minlength": 8})
    yield Sample((torch.randint(0, 4, (12,)), make(12)), {"minlength": 4})
    yield Sample((torch.randint(0, 4, (16,))[::2], make(8, noncontiguous=True), 5))
    yield Sample((torch.randint(0, 4, (7,), dtype=torch.int32),), {"minlength": 4})
    yield Sample((torch.zeros(0, dtype=torch.int64),), {"minlength": 3})


CASES = [
    OpCase("cummax", (torch.cummax, method("cummax")), _running_samples, (*ALL, torch.bool)),
    OpCase("cummin", (torch.cummin, method("cummin")), _running_samples, ALL),
    OpCase("logcumsumexp", (torch.logcumsumexp, method("logcumsumexp")), _logcumsumexp_samples, FLOATS),
    OpCase("bincount", (torch.bincount, method("bincount")), _bincount_samples, ALL),
]
