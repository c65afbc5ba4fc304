"""Op cases: the spellings of compiler/ops/spellings.py whose signature is their own:
torch.linalg.diagonal (keyword-only, the last two dims by default), torch.linalg.vecdot and
Tensor.sum_to_size (each size as an argument, or one tuple or torch.Size)."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from tests.support.opinfo.samples import ALL, FLOATS, Maker, OpCase, Sample, method


def _linalg_diagonal_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(4, 4),))
    yield Sample((make(2, 3, 5, transposed=True),))  # the last two dims by default
    yield Sample((make(2, 3, 5),), {"offset": 1})
    yield Sample((make(3, 5, noncontiguous=True),), {"offset": -2})
    yield Sample((make(2, 3, 4, noncontiguous=True),), {"offset": 1, "dim1": 2, "dim2": 0})
    yield Sample((make(3, 3),), {"offset": 5})  # an offset past the matrix: empty


def _vecdot_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(4, 7), make(4, 7)))
    yield Sample((make(2, 1, 5, noncontiguous=True), make(3, 5)))  # broadcast
    yield Sample((make(3, 6, transposed=True), make(3, 6)), {"dim": 0})
    yield Sample((make(5), make(5)))
    yield Sample((make(2, 3, 4), make(2, 1, 4, noncontiguous=True)), {"dim": -1})


def _sum_to_size_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(4, 5), 1, 5))
    yield Sample((make(4, 5, transposed=True), (4, 1)))
    yield Sample((make(2, 3, 4, noncontiguous=True), torch.Size([3, 1])))  # a leading dim summed away
    yield Sample((make(2, 3, 4), 4))
    yield Sample((make(3, 1, 4), 3, 1, 1))  # a size-1 dim stays
    yield Sample((make(3, 4), 3, 4))  # already that size: the input itself
    yield Sample((make(3, 4), ()))  # everything: a 0-d tensor
    yield Sample((make(3, 4, dtype=torch.bool), 1, 4))  # bools sum in int64


CASES = [
    OpCase("linalg.diagonal", (torch.linalg.diagonal,), _linalg_diagonal_samples, ALL),
    OpCase("linalg.vecdot", (torch.linalg.vecdot,), _vecdot_samples, FLOATS),
    OpCase("sum_to_size", (method("sum_to_size"),), _sum_to_size_samples, ALL),
]
