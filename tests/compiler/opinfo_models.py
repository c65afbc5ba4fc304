"""Op cases for the ops transformer models add: embedding, triangular masks, repeats, and dropout
where it draws nothing (eval mode, p=0, p=1; seeded draws are compared in test_model_ops.py)."""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F

from tests.compiler.opinfo import ALL, FLOATS, Maker, OpCase, Sample, method


def _embedding_samples(make: Maker) -> Iterator[Sample]:
    weight = make(7, 5)
    for shape in [(3,), (2, 4), (), (0,), (2, 1, 3)]:
        yield Sample((make(*shape, dtype=torch.int64, low=0, high=7), weight))
    yield Sample((make(2, 2, dtype=torch.int64, low=0, high=7), make(7, 3, noncontiguous=True)), {"padding_idx": 1})


def _triangle_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(4, 4),))
    yield Sample((make(3, 5, noncontiguous=True), 1))
    yield Sample((make(2, 5, 3), -1))
    yield Sample((make(4, 2, transposed=True), 3))
    yield Sample((make(0, 3), 0))


def _repeat_interleave_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(2, 3), 2), {"dim": 0})
    yield Sample((make(2, 3, 4, noncontiguous=True), 3), {"dim": -2})
    yield Sample((make(2, 3), 2))
    yield Sample((make(), 3))
    yield Sample((make(2, 0), 2), {"dim": 1})


def _repeat_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(2, 3), 2, 2))
    yield Sample((make(2, 3, transposed=True), 3, 1, 2))
    yield Sample((make(3), (2, 1, 1)))
    yield Sample((make(), 2))
    yield Sample((make(2, 2), 0, 1))


def _dropout_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(3, 4), 0.5, False))
    yield Sample((make(3, 4, noncontiguous=True), 0.0, True))
    yield Sample((make(2, 5), 1.0, True))


CASES = [
    OpCase("embedding", (F.embedding,), _embedding_samples, FLOATS),
    OpCase("triu", (torch.triu, method("triu")), _triangle_samples, ALL),
    OpCase("tril", (torch.tril, method("tril")), _triangle_samples, ALL),
    OpCase(
        "repeat_interleave",
        (torch.repeat_interleave, method("repeat_interleave")),
        _repeat_interleave_samples,
        ALL,
    ),
    OpCase("repeat", (method("repeat"),), _repeat_samples, ALL),
    OpCase("dropout", (F.dropout, torch.dropout), _dropout_samples, FLOATS),
]
