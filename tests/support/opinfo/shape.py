"""Op cases: shape ops, basic indexing, index_select/index_copy/gather, factories, einsum."""

from __future__ import annotations

import operator
from collections.abc import Iterator

import torch

from tests.support.opinfo.samples import ALL, Maker, OpCase, Sample, method, named

# ---------------------------------------------------------------------------------------------
# Views and reshapes


def _reshape_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(4, 6), (3, 8)))
    yield Sample((make(4, 6, noncontiguous=True), (-1,)))
    yield Sample((make(2, 3, 4, transposed=True), (4, -1)))
    yield Sample((make(), (1, 1)))
    yield Sample((make(1), ()))
    yield Sample((make(0, 3), (3, 0)))


def _view_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(4, 6), 3, 8))  # view takes varargs too
    yield Sample((make(4, 6), (2, -1, 3)))
    yield Sample((make(), (1,)))


def _as_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(4, 6), make(2, 12)))
    yield Sample((make(6), make(3, 2)))


def _permute_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(2, 3, 4), (2, 0, 1)))
    yield Sample((make(2, 3, 4, noncontiguous=True), (-1, -3, 1)))
    yield Sample((make(2, 3), (0, 1)))
    yield Sample((make(), ()))


def _permute_method(x: torch.Tensor, dims: tuple) -> torch.Tensor:
    """x.permute(*dims), the varargs form (torch wants the tuple form for no dims at all)."""
    return x.permute(*dims) if dims else x.permute(dims)


def _transpose_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(2, 3, 4), 0, 2))
    yield Sample((make(2, 3, 4, transposed=True), -1, -2))
    yield Sample((make(5), 0, -1))
    yield Sample((make(), 0, 0))


def _t_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(3, 4, noncontiguous=True),))
    yield Sample((make(4),))
    yield Sample((make(),))


def _property_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(2, 3, 4),))
    yield Sample((make(3, 4, transposed=True),))


def _expand_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(3, 1), 3, 4))
    yield Sample((make(1, 4, noncontiguous=True), (2, 5, -1)))
    yield Sample((make(), (2, 3)))
    yield Sample((make(3, 1), [-1, 2]))


def _broadcast_to_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(3, 1), (3, 4)))
    yield Sample((make(1, 4, noncontiguous=True), (2, 5, 4)))
    yield Sample((make(), (2, 3)))


def _squeeze_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(3, 1, 4, 1),))
    yield Sample((make(3, 1, 4, 1, noncontiguous=True), 1))
    yield Sample((make(3, 1, 4, 1), -1))
    yield Sample((make(3, 1, 4, 1), 0))  # not of size 1: unchanged
    yield Sample((make(3, 1, 4, 1), (1, 3)))
    yield Sample((make(1),))
    yield Sample((make(), 0))


def _unsqueeze_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(3, 4), 0))
    yield Sample((make(3, 4, transposed=True), -1))
    yield Sample((make(3, 4), 1))
    yield Sample((make(), 0))


def _flatten_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(2, 3, 4),))
    yield Sample((make(2, 3, 4, noncontiguous=True), 1))
    yield Sample((make(2, 3, 4, 5), 1, -2))
    yield Sample((make(2, 3), 1, 1))
    yield Sample((make(),))


def _ravel_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(2, 3, 4),))
    yield Sample((make(3, 4, transposed=True),))
    yield Sample((make(),))


def _contiguous_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(3, 4, transposed=True),))
    yield Sample((make(3, 4),))


def _identity(x: torch.Tensor) -> torch.Tensor:
    """Calls .contiguous() and then computes with it, so the jitted result is a fresh tensor too."""
    return x.contiguous() * 1


SHAPE = [
    OpCase("reshape", (torch.reshape, method("reshape")), _reshape_samples, ALL),
    OpCase("view", (method("view"), method("reshape")), _view_samples, ALL),
    OpCase("view_as", (method("view_as"), method("reshape_as")), _as_samples, ALL),
    OpCase("permute", (torch.permute, named("Tensor.permute", _permute_method)), _permute_samples, ALL),
    OpCase(
        "transpose",
        (torch.transpose, method("transpose"), torch.swapaxes, method("swapaxes"), torch.swapdims, method("swapdims")),
        _transpose_samples,
        ALL,
    ),
    OpCase("t", (torch.t, method("t")), _t_samples, ALL),
    OpCase("T", (named("T", lambda x: x.T), named("mT", lambda x: x.mT)), _property_samples, ALL),
    OpCase("expand", (method("expand"),), _expand_samples, ALL),
    OpCase("expand_as", (method("expand_as"),), lambda make: [Sample((make(3, 1), make(2, 3, 4)))], ALL),
    OpCase("broadcast_to", (torch.broadcast_to, method("broadcast_to")), _broadcast_to_samples, ALL),
    OpCase("squeeze", (torch.squeeze, method("squeeze")), _squeeze_samples, ALL),
    OpCase("unsqueeze", (torch.unsqueeze, method("unsqueeze")), _unsqueeze_samples, ALL),
    OpCase("flatten", (torch.flatten, method("flatten")), _flatten_samples, ALL),
    OpCase("ravel", (torch.ravel, method("ravel")), _ravel_samples, ALL),
    OpCase("contiguous", (method("contiguous"), named("contiguous*1", _identity)), _contiguous_samples, ALL),
]

# ---------------------------------------------------------------------------------------------
# Joining and splitting


def _cat_samples(make: Maker) -> Iterator[Sample]:
    yield Sample(([make(2, 3), make(4, 3)],))
    yield Sample(([make(2, 3, noncontiguous=True), make(2, 1), make(2, 4, transposed=True)], -1))
    yield Sample(((make(2, 3), make(2, 3, dtype=torch.float64)), 0))  # promotion
    yield Sample(([make(2, 3), make(0)], 1))  # a legacy empty 1-D tensor is skipped
    yield Sample(([make(3)],), {"dim": 0})


def _stack_samples(make: Maker) -> Iterator[Sample]:
    yield Sample(([make(2, 3), make(2, 3)],))
    yield Sample(([make(2, 3, noncontiguous=True), make(2, 3), make(2, 3, transposed=True)], -1))
    yield Sample(([make(), make()], 0))
    yield Sample(([make(4)],), {"dim": 1})


def _split_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(7, 3), 3))
    yield Sample((make(7, 3), [2, 0, 5]))
    yield Sample((make(4, 6, noncontiguous=True), (1, 2, 3), 1))
    yield Sample((make(4, 6, transposed=True), 4), {"dim": -1})
    yield Sample((make(4, 6), 10))


def _split_with_sizes_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(7, 3), [2, 5]))
    yield Sample((make(4, 6, noncontiguous=True), (1, 2, 3), 1))


def _chunk_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(7, 3), 3))
    yield Sample((make(6, 4, transposed=True), 2, 1))
    yield Sample((make(2, 5), 4, -1))  # more chunks than elements along dim 0
    yield Sample((make(5), 1))
    yield Sample((make(0, 3), 3))  # an empty dim: `chunks` empty pieces, as torch gives


def _narrow_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(5, 6), 0, 1, 3))
    yield Sample((make(5, 6, noncontiguous=True), -1, -4, 2))
    yield Sample((make(5, 6), 1, 0, 0))


def _unbind_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(3, 4),))
    yield Sample((make(3, 4, transposed=True), 1))


JOIN_SPLIT = [
    OpCase("cat", (torch.cat, torch.concat, torch.concatenate), _cat_samples, ALL),
    OpCase("stack", (torch.stack,), _stack_samples, ALL),
    OpCase("split", (torch.split, method("split")), _split_samples, ALL),
    OpCase("split_with_sizes", (torch.split_with_sizes, method("split_with_sizes")), _split_with_sizes_samples, ALL),
    OpCase("chunk", (torch.chunk, method("chunk")), _chunk_samples, ALL),
    OpCase("narrow", (torch.narrow, method("narrow")), _narrow_samples, ALL),
    OpCase("unbind", (torch.unbind, method("unbind")), _unbind_samples, ALL),
]

# ---------------------------------------------------------------------------------------------
# Indexing


def _getitem_samples(make: Maker) -> Iterator[Sample]:
    x = make(5, 6, 4)
    keys = [
        1,
        -1,
        slice(1, 3),
        slice(None, None, 2),
        (slice(None), 2),
        (Ellipsis, 0),
        None,
        (slice(None), None, slice(1, None)),
        (1, Ellipsis, None),
        (slice(-3, -1), slice(None, None, 3)),
        slice(4, 2),  # empty
        slice(2, 100),  # clamped
        (slice(None), slice(-100, 2), -2),
        (0, 1, 2),
        torch.tensor([4, 0, 0, 2]),
        torch.tensor(3),  # a 0-d index selects like an int
    ]
    for key in keys:
        yield Sample((x, key))
    yield Sample((make(5, 6, noncontiguous=True), (slice(1, None, 2), -1)))
    yield Sample((make(4, 6, transposed=True), (Ellipsis, slice(1, 3))))
    yield Sample((make(), Ellipsis))
    yield Sample((make(), None))


def _index_select_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(5, 4), 0, make.index(5, 3)))
    yield Sample((make(5, 4, transposed=True), -1, make.index(4, 6)))
    yield Sample((make(5, 4), 1, torch.tensor(2)))  # a 0-d index
    yield Sample((make(), 0, torch.tensor([0])))


def _index_copy_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(5, 4), 0, torch.tensor([3, 0]), make(2, 4)))
    yield Sample((make(5, 4, noncontiguous=True), 1, torch.tensor([2, 1, 3]), make(5, 3, transposed=True)))
    yield Sample((make(5, 4), -2, torch.tensor(4), make(1, 4)))  # a 0-d index
    yield Sample((make(5), 0, torch.tensor(1), make()))


def _gather_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(5, 4), 1, make.index(4, 5, 2)))
    yield Sample((make(5, 4, noncontiguous=True), 0, make.index(5, 7, 4)))
    yield Sample((make(3, 4, 2, transposed=True), -1, make.index(2, 3, 4, 1)))


INDEXING = [
    OpCase("getitem", (operator.getitem,), _getitem_samples, ALL),
    OpCase("index_select", (torch.index_select, method("index_select")), _index_select_samples, ALL),
    OpCase("index_copy", (torch.index_copy, method("index_copy")), _index_copy_samples, ALL),
    OpCase("gather", (torch.gather, method("gather")), _gather_samples, ALL),
]

# ---------------------------------------------------------------------------------------------
# Factories


def _sized_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((2, 3), {"dtype": make.dtype})
    yield Sample(((4,),), {"dtype": make.dtype, "device": "cpu"})
    yield Sample(([2, 0, 3],), {"dtype": make.dtype})
    yield Sample(((),), {"dtype": make.dtype})
    if make.dtype == torch.float32:
        yield Sample((3, 2))  # the default dtype


def _full_samples(make: Maker) -> Iterator[Sample]:
    yield Sample(((2, 3), 7), {"dtype": make.dtype})
    yield Sample(([4], -1.5 if make.is_float else 3), {"dtype": make.dtype})
    if make.dtype == torch.float32:
        for value in (2, 2.5, True):  # the dtype follows the fill value
            yield Sample(((2, 2), value))


def _like_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(3, 4),))
    yield Sample((make(3, 4, transposed=True),), {"dtype": torch.float64})
    yield Sample((make(),))


def _full_like_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(3, 4), 5))
    yield Sample((make(2, 3, noncontiguous=True), 1.5), {"dtype": torch.float64})
    yield Sample((make(), True))


def _arange_samples(make: Maker) -> Iterator[Sample]:
    if make.is_float:
        yield Sample((0.0, 1.0, 0.1), {"dtype": make.dtype})
        yield Sample((5,), {"dtype": make.dtype})
        yield Sample((2.5,))
        yield Sample((-1, 2, 0.25))
    else:
        yield Sample((5,))
        yield Sample((1, 8, 3))
        yield Sample((10, 2, -3))
        yield Sample((3, 3))


def _linspace_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((0, 1, 5), {"dtype": make.dtype})
    yield Sample((-2.5, 7, 37), {"dtype": make.dtype})  # both halves, a float start truncated for int64
    yield Sample((3, -4.5, 2), {"dtype": make.dtype, "device": "cpu"})
    yield Sample((1.5, 3, 1), {"dtype": make.dtype})
    yield Sample((1, 3, 0), {"dtype": make.dtype})
    if make.dtype == torch.float32:
        yield Sample((-1, 1, 8))  # the default dtype


FACTORIES = [
    OpCase("zeros", (torch.zeros,), _sized_samples, ALL),
    OpCase("ones", (torch.ones,), _sized_samples, ALL),
    OpCase("empty", (torch.empty,), _sized_samples, ALL, compare_values=False),
    OpCase("full", (torch.full,), _full_samples, ALL),
    OpCase("zeros_like", (torch.zeros_like,), _like_samples, ALL),
    OpCase("ones_like", (torch.ones_like,), _like_samples, ALL),
    OpCase("empty_like", (torch.empty_like,), _like_samples, ALL, compare_values=False),
    OpCase("full_like", (torch.full_like,), _full_like_samples, ALL),
    OpCase("arange", (torch.arange,), _arange_samples, ALL),
    OpCase("linspace", (torch.linspace,), _linspace_samples, ALL),
]

# ---------------------------------------------------------------------------------------------
# einsum (tests/compiler/ops/test_einsum_linspace.py has more)


def _einsum_samples(make: Maker) -> Iterator[Sample]:
    yield Sample(("ij,jk->ik", make(3, 4), make(4, 5, transposed=True)))
    yield Sample(("bhqd,bhkd->bhqk", make(2, 2, 3, 4), make(2, 2, 5, 4)))
    yield Sample(("i,j->ij", make(3), make(4, noncontiguous=True)))
    yield Sample(("ii->i", make(3, 3)))
    yield Sample(("...ij,...jk", make(2, 1, 3, 4), make(5, 4, 2)))  # broadcast batch dims, implicit output
    yield Sample(("ij,jk,kl->il", [make(2, 3), make(3, 4), make(4, 2)]))  # the operands as one list
    yield Sample(("ij->", make(3, 4)))


EINSUM = [OpCase("einsum", (torch.einsum,), _einsum_samples, ALL)]

# ---------------------------------------------------------------------------------------------
# flip, roll, tile, diff


def _flip_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(3, 4, 5), (0, 2)))
    yield Sample((make(3, 4, noncontiguous=True), [-1]))
    yield Sample((make(2, 5, transposed=True), (0, 1)))
    yield Sample((make(1, 4), (0,)))
    yield Sample((make(4), ()))
    yield Sample((make(), ()))


def _varargs_flip_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(3, 4, 5),))


def _roll_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(3, 4, 5), 2, 1))
    yield Sample((make(3, 4, 5), (1, -3), (0, 2)))
    yield Sample((make(3, 4, noncontiguous=True), 7))  # flattened, more than the size
    yield Sample((make(4, 2, transposed=True), -5, 0))
    yield Sample((make(4), 0, 0))


def _tile_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(2, 3), (2,)))
    yield Sample((make(2, 3, noncontiguous=True), (2, 1, 3)))
    yield Sample((make(3), (2, 2)))
    yield Sample((make(), (3,)))


def _diff_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(3, 6),))
    yield Sample((make(4, 5, noncontiguous=True),), {"n": 2, "dim": 0})
    yield Sample((make(3, 4),), {"dim": 1, "prepend": make(3, 1), "append": make(3, 2)})
    yield Sample((make(5),), {"n": 7})  # more differences than elements: empty
    yield Sample((make(4, 3) > 0,), {"dim": 0})


REARRANGE = [
    OpCase("flip", (torch.flip, method("flip")), _flip_samples, ALL),
    OpCase("flip_varargs", (named("Tensor.flip(*dims)", lambda x: x.flip(2, 0)),), _varargs_flip_samples, ALL),
    OpCase("fliplr", (torch.fliplr, method("fliplr")), lambda make: [Sample((make(3, 4, 2),))], ALL),
    OpCase("flipud", (torch.flipud, method("flipud")), lambda make: [Sample((make(3, 4),))], ALL),
    OpCase("roll", (torch.roll, method("roll")), _roll_samples, ALL),
    OpCase("tile", (torch.tile, method("tile")), _tile_samples, ALL),
    OpCase("diff", (torch.diff, method("diff")), _diff_samples, ALL),
]

CASES = SHAPE + JOIN_SPLIT + INDEXING + FACTORIES + EINSUM + REARRANGE
