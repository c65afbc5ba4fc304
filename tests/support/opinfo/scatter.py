"""Op cases: the scatters (torch.scatter with a tensor or a number, scatter_add, scatter_reduce in
every mode with and without self), their Tensor methods and in-place forms.

Plain scatter gets indices that never repeat a position (eager keeps an unspecified one of repeated
writes); the accumulating forms get repeats on purpose. Indices smaller than self off `dim` and src
larger than the index (torch reads only the index's part of it) are in every table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch

from tests.support.opinfo.samples import ALL, Maker, OpCase, Sample, method, named

REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def unique_index(size: int, shape: tuple[int, ...], dim: int) -> torch.Tensor:
    """An int64 index of `shape` with values in [0, size), no two equal along `dim` (each slice
    along `dim` is the start of a random permutation)."""
    full = list(shape)
    full[dim] = size
    return torch.rand(full).argsort(dim).narrow(dim, 0, shape[dim])


def _value(make: Maker) -> float | int:
    return 2.5 if make.is_float else 3


def _scatter_samples(make: Maker) -> Iterator[Sample]:
    x = make(4, 5)
    yield Sample((x, 0, unique_index(4, (3, 5), 0), make(3, 5)))
    yield Sample((x, 1, unique_index(5, (4, 2), 1), make(4, 2)))
    yield Sample((x, -1, unique_index(5, (2, 3), 1), make(3, 4)))  # index smaller than self and src
    yield Sample((make(4, 5, noncontiguous=True), -2, unique_index(4, (4, 5), 0), make(4, 5, transposed=True)))
    yield Sample((make(3, 4, 5), 1, unique_index(4, (2, 2, 5), 1), make(3, 3, 5)))
    yield Sample((make(1, 5), 1, unique_index(5, (1, 3), 1), make(1, 3)))  # size-1 dims
    yield Sample((make(4, 1, 3), 0, unique_index(4, (2, 1, 3), 0), make(2, 1, 3)))
    yield Sample((make(5, 4, transposed=True), 1, unique_index(4, (5, 4), 1), make(5, 4)))
    yield Sample((make(), 0, torch.tensor(0), make()))  # 0-d
    yield Sample((x, 0, torch.zeros(0, 5, dtype=torch.int64), make(3, 5)))  # an empty index: a copy
    yield Sample((x, 1, unique_index(5, (4, 3), 1).int(), make(4, 3)))  # int32 index
    yield Sample((x, 0, unique_index(4, (2, 5), 0)), {"value": _value(make)})
    yield Sample((make(3, 4, 2), -1, unique_index(2, (3, 4, 1), 2), _value(make)))
    yield Sample((make(), 0, torch.tensor(0), _value(make)))
    for reduce in ("add", "multiply"):  # repeated positions accumulate
        yield Sample((x, 0, make.index(4, 6, 5), make.small_values(6, 5)), {"reduce": reduce})
        yield Sample((make(3, 4), -1, make.index(4, 3, 7)), {"value": _value(make), "reduce": reduce})


def _scatter_add_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(4, 5), 0, make.index(4, 6, 5), make(6, 5)))  # repeated positions
    yield Sample((make(4, 5), -1, make.index(5, 4, 9), make(4, 9)))
    yield Sample((make(4, 5, noncontiguous=True), 1, make.index(5, 2, 3), make(3, 4, transposed=True)))
    yield Sample((make(2, 3, 4), 2, make.index(4, 2, 3, 6), make(2, 3, 6)))
    yield Sample((make(1, 4), 0, make.index(1, 3, 4), make(3, 4)))  # size-1 dim
    yield Sample((make(), 0, torch.tensor(0), make()))


def _scatter_reduce_samples(make: Maker) -> Iterator[Sample]:
    for reduce in REDUCTIONS:
        for include_self in (True, False):
            kwargs = {"include_self": include_self}
            yield Sample((make(4, 5), 0, make.index(4, 6, 5), make(6, 5), reduce), kwargs)
            yield Sample((make.small_values(4, 5), -1, make.index(5, 4, 8), make.small_values(4, 8), reduce), kwargs)
            yield Sample((make(3, 2, 4, transposed=True), 1, make.index(2, 2, 5, 4), make(3, 5, 4), reduce), kwargs)
            yield Sample((make(1, 5), 0, make.index(1, 3, 2), make(3, 2), reduce), kwargs)  # only some written
    yield Sample((make(), 0, torch.tensor(0), make(), "amax"))
    yield Sample((make(3, 4), 1, make.index(4, 3, 5), make(3, 5), "max"), {"include_self": False})  # eager's aliases
    yield Sample((make(3, 4), 1, make.index(4, 3, 5), make(3, 5), "min"))
    yield Sample((make(3, 4), 1, make.index(4, 3, 2), make(3, 2), "mean"))  # include_self defaults to True


def _inplace(name: str) -> Callable:
    def fn(x: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
        target = x.clone()
        getattr(target, name)(*args, **kwargs)
        return target

    return named(f"Tensor.{name}", fn)


CASES = [
    OpCase("scatter", (torch.scatter, method("scatter"), _inplace("scatter_")), _scatter_samples, ALL),
    OpCase("scatter_add", (torch.scatter_add, method("scatter_add"), _inplace("scatter_add_")),
           _scatter_add_samples, ALL),
    OpCase("scatter_reduce", (torch.scatter_reduce, method("scatter_reduce"), _inplace("scatter_reduce_")),
           _scatter_reduce_samples, ALL),
]  # fmt: skip
