"""Op cases for the ops transformer models add: embedding, triangular masks, repeats, addmm (and
mv, dot, addmv, addr, baddbmm, addbmm),
constant padding, new_* factories, indexing with several index tensors, and dropout where it
draws nothing (eval mode, p=0, p=1; seeded draws are compared in test_model_ops.py)."""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F

from tests.support.opinfo.samples import ALL, FLOATS, Maker, OpCase, Sample, method, named


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


def _random_samples(make: Maker) -> Iterator[Sample]:
    # NOTE: the test seeds torch before each call: compiled draws must equal eager's.
    yield Sample((2, 3), {"dtype": make.dtype})
    yield Sample(((4, 1, 5),), {"dtype": make.dtype})
    yield Sample(([2, 0, 3],), {"dtype": make.dtype})
    yield Sample(((),), {"dtype": make.dtype})
    if make.dtype == torch.float32:
        yield Sample((3, 2))  # the default dtype


def _random_like_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(3, 4),))
    yield Sample((make(2, 5, noncontiguous=True),))
    yield Sample((make(),), {"dtype": torch.float64})


def _addmm_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(4), make(3, 5), make(5, 4)))
    yield Sample((make(3, 4), make(3, 5, noncontiguous=True), make(5, 4)), {"beta": 2, "alpha": 3})
    yield Sample((make(1, 4), make(3, 2), make(2, 4, transposed=True)), {"beta": 0})


def _mv_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(3, 5), make(5)))
    yield Sample((make(4, 2, transposed=True), make(2, noncontiguous=True)))
    yield Sample((make(1, 1), make(1)))


def _dot_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(5), make(5)))
    yield Sample((make(3, noncontiguous=True), make(3)))
    yield Sample((make(1), make(1)))


def _addmv_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(3), make(3, 5), make(5)))
    yield Sample((make(1), make(4, 2, transposed=True), make(2)), {"beta": 2, "alpha": -1})
    yield Sample((make(3).fill_(float("nan")), make(3, 2), make(2)), {"beta": 0})  # input ignored


def _addr_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(3, 4), make(3), make(4)))
    yield Sample((make(4), make(2, noncontiguous=True), make(4)), {"beta": 0.5, "alpha": 2})


def _baddbmm_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(2, 3, 5), make(2, 3, 4), make(2, 4, 5)))
    yield Sample((make(1, 1, 5), make(3, 2, 4, noncontiguous=True), make(3, 4, 5)), {"beta": 2, "alpha": 0.5})
    yield Sample((make(2, 3, 1).fill_(float("nan")), make(2, 3, 2), make(2, 2, 1)), {"beta": 0})
    yield Sample((make(1, 3, 3), make(1, 3, 4), make(1, 4, 3, transposed=True)))


def _addbmm_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(3, 5), make(2, 3, 4), make(2, 4, 5)))
    yield Sample((make(5), make(4, 3, 2, noncontiguous=True), make(4, 2, 5)), {"beta": -1, "alpha": 2})
    yield Sample((make(2, 2), make(1, 2, 3), make(1, 3, 2)), {"beta": 0})


def _outer_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(3), make(4)))
    yield Sample((make(5, noncontiguous=True), make(1)))
    yield Sample((make(3), make(2, dtype=torch.float64)))  # promoted as mul


def _one_hot_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make.index(5, 4), 5))
    yield Sample((make.index(3, 2, 3), 4))
    yield Sample((make.index(3), 3))


def _pad_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(3, 4), (1, 2)))
    yield Sample((make(2, 3, 4, noncontiguous=True), (0, 1, 2, 0)), {"value": 5})
    yield Sample((make(3, 5), (-1, 2, 1, -1)))
    yield Sample((make(2, 0), (1, 1)))


def _new_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(2, 3), (4, 2)))
    yield Sample((make(3), ()))
    yield Sample((make(3), (2, 2)), {"dtype": torch.bool})


def _new_full_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(2, 3), (4, 2), 7))
    yield Sample((make(3), (), -1), {"dtype": torch.int64})


def _new_tensor_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(2, 3), [1.0, 2.0]))
    yield Sample((make(3), [[1, 2], [3, 4]]), {"dtype": torch.int64})
    yield Sample((make(3), 0.5))


def _interpolate_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(2, 3, 5, 7),), {"size": (8, 4), "mode": "bilinear"})
    yield Sample((make(2, 3, 5, 7),), {"size": (11, 13), "mode": "bilinear", "align_corners": True})
    yield Sample((make(1, 2, 6, 6),), {"scale_factor": 1.5, "mode": "bilinear"})
    yield Sample((make(1, 2, 9),), {"size": 4, "mode": "linear"})
    yield Sample((make(2, 3, 5, 7),), {"scale_factor": 2, "mode": "nearest"})
    yield Sample((make(2, 3, 4, 4, 4),), {"size": (2, 5, 3), "mode": "nearest"})
    yield Sample((make(2, 3, 5, 7),), {"size": (3, 20), "mode": "nearest-exact"})


def _meshgrid_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(3), make(4)), {"indexing": "ij"})
    yield Sample((make(3), make(4), make(2)), {"indexing": "xy"})
    yield Sample((make(), make(5)), {"indexing": "ij"})


def _index_tensors_samples(make: Maker) -> Iterator[Sample]:
    rows = make(3, 1, dtype=torch.int64, low=-4, high=4)
    yield Sample((make(4, 5), (rows, make(1, 2, dtype=torch.int64, low=-5, high=5))))
    picks = (make(3, dtype=torch.int64, low=0, high=4), make(3, dtype=torch.int64, low=0, high=5))
    yield Sample((make(4, 5, 2, noncontiguous=True), picks))


def _index(x: torch.Tensor, keys: tuple) -> torch.Tensor:
    return x[keys]


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
    OpCase("randn", (torch.randn,), _random_samples, FLOATS),
    OpCase("rand", (torch.rand,), _random_samples, FLOATS),
    OpCase("randn_like", (torch.randn_like,), _random_like_samples, FLOATS),
    OpCase("rand_like", (torch.rand_like,), _random_like_samples, FLOATS),
    OpCase("addmm", (torch.addmm, method("addmm")), _addmm_samples, FLOATS),
    OpCase("outer", (torch.outer, method("outer"), torch.ger, method("ger")), _outer_samples, ALL),
    OpCase("mv", (torch.mv, method("mv")), _mv_samples, FLOATS),
    OpCase("dot", (torch.dot, method("dot"), torch.vdot, method("vdot")), _dot_samples, FLOATS),
    OpCase("addmv", (torch.addmv, method("addmv")), _addmv_samples, FLOATS),
    OpCase("addr", (torch.addr, method("addr")), _addr_samples, FLOATS),
    OpCase("baddbmm", (torch.baddbmm, method("baddbmm")), _baddbmm_samples, FLOATS),
    # NOTE: eager addbmm on the CPU adds one batch at a time, rounding to bf16 after each (on CUDA it
    # is one matmul over all batches, as here): up to a few bf16 ulps apart
    OpCase("addbmm", (torch.addbmm, method("addbmm")), _addbmm_samples, FLOATS, {torch.bfloat16: (5e-2, 1e-2)}),
    OpCase("one_hot", (F.one_hot,), _one_hot_samples, (torch.int64,)),
    OpCase("pad", (F.pad, torch._C._nn.pad), _pad_samples, ALL),
    OpCase("new_zeros", (method("new_zeros"),), _new_samples, ALL),
    OpCase("new_ones", (method("new_ones"),), _new_samples, ALL),
    OpCase("new_full", (method("new_full"),), _new_full_samples, ALL),
    OpCase("new_tensor", (method("new_tensor"),), _new_tensor_samples, ALL),
    OpCase("new_empty", (method("new_empty"),), _new_samples, ALL, compare_values=False),
    OpCase("interpolate", (F.interpolate,), _interpolate_samples, FLOATS),
    OpCase("meshgrid", (torch.meshgrid,), _meshgrid_samples, ALL),
    OpCase("index_with_tensors", (named("Tensor.__getitem__(tensors)", _index),), _index_tensors_samples, ALL),
]
