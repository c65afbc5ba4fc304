"""Op cases: the ops of compiler/ops/shape_compositions.py and compiler/ops/layout_queries.py, and
Tensor.new_empty."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from tests.support.opinfo.samples import ALL, FLOATS, Maker, OpCase, Sample, method, named


def _unflatten_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(4, 6), 1, (2, 3)))
    yield Sample((make(4, 6, transposed=True), -1, (3, -1)))
    yield Sample((make(6), 0, (1, 6, 1)))
    yield Sample((make(0, 6), 1, (2, -1)))  # the -1 comes from the dim split, not the element count


def _select_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(4, 6), 1, 2))
    yield Sample((make(3, 4, 5, noncontiguous=True), -1, -1))
    yield Sample((make(5), 0, 0))


def _tensor_split_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(7, 3), 3))
    yield Sample((make(4, 6, transposed=True), [1, 4], 1))
    yield Sample((make(5, 2), (2, -1, 9)))  # out of order and out of range cuts: empty pieces
    yield Sample((make(2, 5), 7), {"dim": -1})  # more sections than elements


def _stack_family_samples(make: Maker) -> Iterator[Sample]:
    yield Sample(([make(3), make(3)],))
    yield Sample(([make(2, 3), make(2, 3, noncontiguous=True)],))
    yield Sample(([make(), make()],))


def _at_least_samples(make: Maker) -> Iterator[Sample]:
    for shape in ((), (3,), (2, 3), (2, 3, 4)):
        yield Sample((make(*shape),))
    yield Sample(([make(), make(2, 3)],))
    yield Sample((make(3), make(2, 3, noncontiguous=True)))


def _broadcast_tensors_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(3, 1), make(4)))
    yield Sample((make(2, 1, 3, noncontiguous=True), make(4, 1), make()))
    yield Sample((make(2, 3),))


def _hstack_samples(make: Maker) -> Iterator[Sample]:
    yield from _stack_family_samples(make)
    yield Sample(([make(2, 3), make(2, 1)],))


def _vstack_samples(make: Maker) -> Iterator[Sample]:
    yield from _stack_family_samples(make)
    yield Sample(([make(2, 3), make(3)],))


def _column_stack_samples(make: Maker) -> Iterator[Sample]:
    yield Sample(([make(3), make(3, 2), make(3)],))
    yield Sample(([make(), make()],))


def _diagonal_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(4, 4),))
    yield Sample((make(3, 5, transposed=True), 1))
    yield Sample((make(3, 5), -2))
    yield Sample((make(2, 3, 4, noncontiguous=True),), {"offset": 1, "dim1": 2, "dim2": 0})
    yield Sample((make(3, 3), 5))  # an offset past the matrix: empty


def _unfold_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(8), 0, 3, 2))
    yield Sample((make(3, 7, noncontiguous=True), 1, 2, 1))
    yield Sample((make(5, 4, transposed=True), 0, 5, 3))
    yield Sample((make(4, 3), 0, 0, 1))


def _take_along_dim_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(4, 5), make.index(5, 4, 2), 1))
    yield Sample((make(4, 5, transposed=True), make.index(4, 1, 5), 0))  # broadcast other dims
    yield Sample((make(3, 4), make.index(12, 5)))  # no dim: of the flattened input


def _index_fill_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(5, 4), 0, torch.tensor([0, 3]), 2))
    yield Sample((make(5, 4, noncontiguous=True), 1, torch.tensor([-1, 1, 1]), -1))
    yield Sample((make(5, 4), -1, torch.tensor(2), make(dtype=make.dtype)))


def _count_nonzero_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make.small_values(4, 5),))
    yield Sample((make.small_values(4, 5, noncontiguous=True), 1))
    yield Sample((make.small_values(2, 3, 4), (0, 2)))


def _eye(n: int, dtype: torch.dtype) -> tuple:
    return torch.eye(n, dtype=dtype), torch.eye(n, n + 2, dtype=dtype), torch.eye(n, 1)


def _layout_queries(x: torch.Tensor) -> tuple:
    y = x if x.is_contiguous() else x.contiguous()
    return y.view(-1) * 2, x.stride(), x.stride(-1), x.mT.is_contiguous()


def _channels_last(x: torch.Tensor) -> tuple:
    y = x.clone(memory_format=torch.channels_last)
    z = torch.empty_like(y).copy_(y)
    return y, y.is_contiguous(memory_format=torch.channels_last), z.stride(), y.contiguous().is_contiguous()


def _layout_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(3, 4),))
    yield Sample((make(3, 4, transposed=True),))
    yield Sample((make(3, 4, noncontiguous=True),))


CASES = [
    OpCase("unflatten", (torch.unflatten, method("unflatten")), _unflatten_samples, ALL),
    OpCase("select", (torch.select, method("select")), _select_samples, ALL),
    OpCase("tensor_split", (torch.tensor_split, method("tensor_split")), _tensor_split_samples, ALL),
    OpCase("hstack", (torch.hstack,), _hstack_samples, ALL),
    OpCase("broadcast_tensors", (torch.broadcast_tensors,), _broadcast_tensors_samples, ALL),
    *(OpCase(f"atleast_{n}d", (getattr(torch, f"atleast_{n}d"),), _at_least_samples, ALL) for n in (1, 2, 3)),
    OpCase("vstack", (torch.vstack, torch.row_stack), _vstack_samples, ALL),
    OpCase("dstack", (torch.dstack,), _stack_family_samples, ALL),
    OpCase("column_stack", (torch.column_stack,), _column_stack_samples, ALL),
    OpCase("diagonal", (torch.diagonal, method("diagonal")), _diagonal_samples, ALL),
    OpCase("unfold", (method("unfold"),), _unfold_samples, ALL),
    OpCase("take_along_dim", (torch.take_along_dim, method("take_along_dim")), _take_along_dim_samples, ALL),
    OpCase("index_fill", (torch.index_fill, method("index_fill")), _index_fill_samples, ALL),
    OpCase("count_nonzero", (torch.count_nonzero, method("count_nonzero")), _count_nonzero_samples, ALL),
    OpCase("eye", (named("torch.eye", _eye),), lambda make: [Sample((3, make.dtype)), Sample((1, make.dtype))], ALL),
    OpCase("layout_queries", (named("is_contiguous/stride", _layout_queries),), _layout_samples, FLOATS),
    OpCase(
        "channels_last_layout",
        (named("clone(channels_last)", _channels_last),),
        lambda make: [Sample((make(2, 3, 4, 5),))],
        FLOATS,
    ),
]
