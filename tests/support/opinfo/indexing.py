"""Op cases: advanced indexing (index tensors and lists in keys) and index_put."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from tests.support.opinfo.samples import ALL, Maker, OpCase, Sample, method, named


def _index(size: int, *shape: int) -> torch.Tensor:
    """Indices in [-size, size): negative ones count from the end."""
    return torch.randint(-size, size, shape, dtype=torch.int64)


def _getitem_samples(make: Maker) -> Iterator[Sample]:
    x = make(4, 5, 6)
    yield Sample((x, _index(4, 3)))
    yield Sample((make(4, 5, 6, noncontiguous=True), (_index(4, 3), _index(5, 3))))
    yield Sample((x, (slice(None), _index(5, 2, 3))))
    yield Sample((x, (_index(4, 2, 1), slice(1, None), _index(6, 3))))  # separated: B goes first
    yield Sample((x, (0, slice(None), _index(6, 2))))  # the int selects first, as in torch
    yield Sample((x, (None, _index(4, 2), Ellipsis, _index(6, 2))))
    yield Sample((x, [0, -1, 2]))
    yield Sample((x, ([0, 1], [-1, 2])))
    yield Sample((x, (Ellipsis, [[1], [2]], [0, 5])))
    yield Sample((make(4, 5, transposed=True), (_index(4, 3), _index(5, 1))))
    yield Sample((make(7), _index(7, 0)))
    yield Sample((make(7), torch.tensor(-2)))


def _index_put_samples(make: Maker) -> Iterator[Sample]:
    for accumulate in (False, True):
        yield Sample((make(4, 5), (_index(4, 3),), make(3, 5)), {"accumulate": accumulate})
        yield Sample((make(4, 5, 6), (_index(4, 6), _index(5, 6)), make(6, 6)), {"accumulate": accumulate})
        yield Sample((make(4, 5, 6), (_index(4, 2, 3), _index(5, 3)), make(6)), {"accumulate": accumulate})
        yield Sample((make(4, 5, 6), (_index(4, 3), _index(5, 3), _index(6, 3)), make(3)), {"accumulate": accumulate})
        yield Sample((make(4, 5, noncontiguous=True), (_index(4, 2), _index(5, 2)), make()), {"accumulate": accumulate})
    # repeated positions: accumulate adds every value
    yield Sample((make(3, 3), (torch.tensor([0, 0, 2, 0]), torch.tensor([1, 1, 2, 1])), make(4)), {"accumulate": True})


def _index_put_(x: torch.Tensor, indices: tuple, values: torch.Tensor, accumulate: bool = False) -> torch.Tensor:
    target = x.clone()
    target.index_put_(indices, values, accumulate=accumulate)
    return target


def _setitem(x: torch.Tensor, indices: tuple, values: torch.Tensor, accumulate: bool = False) -> torch.Tensor:
    target = x.clone()
    target[indices] = values
    return target


CASES = [
    OpCase("advanced getitem", (named("Tensor.__getitem__", lambda x, key: x[key]),), _getitem_samples, ALL),
    OpCase("index_put", (torch.index_put, method("index_put"), named("Tensor.index_put_", _index_put_)),
           _index_put_samples, ALL),
    OpCase("setitem with index tensors", (named("Tensor.__setitem__", _setitem),),
           lambda make: (s for s in _index_put_samples(make) if not s.kwargs["accumulate"]), ALL),
]  # fmt: skip
