"""Op cases: the ops of compiler/ops/matrix_compositions.py (diag, diag_embed, trace, tensordot,
kron, cdist), with offsets past the size, size-1 dims, non-contiguous inputs and broadcast batches."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from tests.support.opinfo.samples import ALL, Maker, OpCase, Sample, method


def _diag_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(5),))
    yield Sample((make(1),), {"diagonal": 2})
    yield Sample((make(4, noncontiguous=True), -3))
    yield Sample((make(4, 6),))
    yield Sample((make(4, 6, transposed=True), 2))
    yield Sample((make(3, 5, noncontiguous=True), -2))
    yield Sample((make(3, 4), 7))  # past the last column: an empty diagonal


def _diag_embed_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(4),))
    yield Sample((make(2, 3),), {"offset": 1})
    yield Sample((make(2, 3, 4, noncontiguous=True), -2, 0, 2))
    yield Sample((make(1, 3, 1), 0, -1, -3))  # dim1 after dim2: the transposed embedding
    yield Sample((make(3, 5, transposed=True), 2, 1, 0))


def _trace_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(4, 4),))
    yield Sample((make(3, 6, transposed=True),))
    yield Sample((make(1, 5),))


def _tensordot_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(2, 3, 4), make(3, 4, 5)))
    yield Sample((make(2, 3, 4), make(4, 5)), {"dims": 1})
    yield Sample(
        (
            make(2, 3),
            make(
                4,
            ),
        ),
        {"dims": 0},
    )
    yield Sample((make(2, 3, 4, noncontiguous=True), make(4, 5, 3)), {"dims": ([1, 2], [2, 0])})
    yield Sample((make(5, 1, 3, transposed=True), make(3, 5)), {"dims": ((2, 0), (0, 1))})
    yield Sample((make(3, 4), make(4, 3, transposed=True)), {"dims": [[0], [1]]})
    yield Sample((make(3, 4), make(4, 3)), {"dims": ([0, 1], [1, 0])})
    yield Sample((make(1, 3, 1), make(2, 1, 2)), {"dims": ([0, 1, 2], [2, 1, 0])})  # size 1 against 2: summed


def _kron_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(2, 3), make(4, 2)))
    yield Sample((make(3), make(2, 2)))
    yield Sample((make(1, 2, 3, noncontiguous=True), make(2, 1)))
    yield Sample((make(2, 3, noncontiguous=True), make(3, 4, noncontiguous=True)))
    yield Sample((make(2, 2), make(3, 1, 4)))
    yield Sample((make(2, 3), make(2, 2, dtype=torch.float64)))  # promotion


def _cdist_samples(make: Maker) -> Iterator[Sample]:
    for p in (2.0, 1.0, 0.0, 0.5, 3.0, float("inf")):
        yield Sample((make(5, 3), make(4, 3)), {"p": p})
    yield Sample((make(2, 1, 5, 3), make(3, 4, 3, noncontiguous=True)))  # broadcast batch dims
    yield Sample((make(2, 30, 4), make(2, 6, 4)))  # over 25 rows: eager's matmul form
    yield Sample((make(30, 4, transposed=True), make(7, 4)), {"compute_mode": "donot_use_mm_for_euclid_dist"})
    yield Sample((make(3, 4), make(6, 4)), {"compute_mode": "use_mm_for_euclid_dist"})
    x = make(4, 3)
    yield Sample((x, torch.cat([x[:2], make(1, 3)])), {"p": 1.5})  # equal rows: distance 0
    yield Sample((make(1, 1), make(1, 1)))


CASES = [
    OpCase("diag", (torch.diag, method("diag")), _diag_samples, (*ALL, torch.bool)),
    OpCase("diag_embed", (torch.diag_embed, method("diag_embed")), _diag_embed_samples, ALL),
    OpCase("trace", (torch.trace, method("trace")), _trace_samples, ALL),
    OpCase("tensordot", (torch.tensordot,), _tensordot_samples, ALL),
    OpCase("kron", (torch.kron, method("kron")), _kron_samples, ALL),
    OpCase("cdist", (torch.cdist,), _cdist_samples, (torch.float32, torch.float64)),
]
