"""Op cases: the ops written as calls of other torch ops (compiler/ops/torch_compositions.py), each
reached through every callable registered for it; channel dropout in eval mode (its training mode
is random: test_torch_compositions.py)."""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F

from tests.support.opinfo.samples import ALL, FLOATS, Maker, OpCase, Sample, method


def _unary(make: Maker) -> Iterator[Sample]:
    yield Sample((make(4, 6),))
    yield Sample((make(3, 5, transposed=True),))
    yield Sample((make(2, 1, 3, noncontiguous=True),))


def _shrink(make: Maker) -> Iterator[Sample]:
    yield from _unary(make)
    yield Sample((make(4, 6), 0.375))


def _softmin(make: Maker) -> Iterator[Sample]:
    yield Sample((make(4, 6), -1))
    yield Sample((make(3, 5, transposed=True), 0))


def _dist(make: Maker) -> Iterator[Sample]:
    yield Sample((make(4, 6), make(4, 6)))
    yield Sample((make(4, 6), make(6), 1))
    yield Sample((make(3, 5, transposed=True), make(3, 5), float("inf")))


def _pixel_shuffle(make: Maker) -> Iterator[Sample]:
    yield Sample((make(2, 8, 3, 3), 2))
    yield Sample((make(9, 2, 2), 3))


def _pixel_unshuffle(make: Maker) -> Iterator[Sample]:
    yield Sample((make(2, 2, 4, 6), 2))
    yield Sample((make(1, 6, 6), 3))


def _rot90(make: Maker) -> Iterator[Sample]:
    yield Sample((make(3, 4),))
    for k in (-1, 2, 3, 4):
        yield Sample((make(2, 3, 4, transposed=True), k, (1, 2)))


def _isin(make: Maker) -> Iterator[Sample]:
    values = make(4, 6)
    yield Sample((values, values.flatten()[:5]))
    yield Sample((values, values[0]), {"invert": True})


def _take(make: Maker) -> Iterator[Sample]:
    yield Sample((make(3, 4), torch.tensor([0, -1, 5, 11])))
    yield Sample((make(3, 4, transposed=True), torch.tensor([[1, 2], [-12, 3]])))


def _slice_scatter(make: Maker) -> Iterator[Sample]:
    yield Sample((make(4, 6), make(4, 2), 1, 1, 5, 2))
    yield Sample((make(4, 6, transposed=True), make(2, 6)), {"start": 2})


def _select_scatter(make: Maker) -> Iterator[Sample]:
    yield Sample((make(4, 6), make(4), 1, 3))
    yield Sample((make(4, 6, transposed=True), make(6), 0, -1))


def _channel_dropout(dims: int):
    def samples(make: Maker) -> Iterator[Sample]:
        yield Sample((make(2, 3, *([4] * dims)),), {"training": False})
        yield Sample((make(3, *([4] * dims)), 0.0))

    return samples


def _instance_norm(make: Maker) -> Iterator[Sample]:
    yield Sample((make(2, 3, 5),))
    yield Sample((make(2, 3, 4, 4, transposed=True),), {"weight": make(3), "bias": make(3), "eps": 1e-3})


CASES = [
    OpCase("softsign", (F.softsign,), _unary, FLOATS),
    OpCase("tanhshrink", (F.tanhshrink,), _unary, FLOATS),
    OpCase("hardshrink", (F.hardshrink, torch.hardshrink, method("hardshrink")), _shrink, FLOATS),
    OpCase("softshrink", (F.softshrink,), _shrink, FLOATS),
    OpCase("softmin", (F.softmin,), _softmin, FLOATS),
    OpCase("dist", (torch.dist, method("dist")), _dist, FLOATS),
    OpCase("pixel_shuffle", (F.pixel_shuffle,), _pixel_shuffle, ALL),
    OpCase("pixel_unshuffle", (F.pixel_unshuffle,), _pixel_unshuffle, ALL),
    OpCase("rot90", (torch.rot90, method("rot90")), _rot90, ALL),
    OpCase("isin", (torch.isin,), _isin, ALL),
    OpCase("take", (torch.take, method("take")), _take, ALL),
    OpCase("slice_scatter", (torch.slice_scatter, method("slice_scatter")), _slice_scatter, ALL),
    OpCase("select_scatter", (torch.select_scatter, method("select_scatter")), _select_scatter, ALL),
    OpCase("dropout1d", (F.dropout1d,), _channel_dropout(1), FLOATS),
    OpCase("dropout2d", (F.dropout2d,), _channel_dropout(2), FLOATS),
    OpCase("dropout3d", (F.dropout3d,), _channel_dropout(3), FLOATS),
    OpCase("instance_norm", (F.instance_norm,), _instance_norm, (torch.float32,)),
]
