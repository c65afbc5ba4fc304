"""Op cases for pooling: adaptive average pooling and pooling over sliding windows (average and max,
1-3 pooled dims), with the arguments users combine: strides other than the kernel, padding, dilation,
ceil_mode (windows past the end), count_include_pad=False and divisor_override, return_indices;
unbatched, non-contiguous and size-1 inputs, ties; and F.unfold, im2col's sliding blocks.
Gradients: tests/compiler/ops/test_pooling_gradients.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F

from tests.support.opinfo.samples import FLOATS, Maker, OpCase, Sample, named


def _adaptive_pool1d_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(2, 3, 8), 1))  # Swin's pooler
    yield Sample((make(2, 3, 7), 3))  # overlapping windows
    yield Sample((make(3, 5, noncontiguous=True), 5))


def _adaptive_pool2d_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(2, 3, 6, 5), (2, 3)))
    yield Sample((make(3, 4, 4), 1))
    yield Sample((make(1, 2, 6, 5), (None, 2)))


def _avg_pool1d_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(2, 3, 8), 2))  # SEW's squeeze: kernel = stride
    yield Sample((make(2, 3, 7), 3), {"stride": 2, "padding": 1, "ceil_mode": True})
    yield Sample((make(3, 7, noncontiguous=True), 3), {"stride": 1, "padding": 1, "count_include_pad": False})
    yield Sample((make(1, 2, 5), 2), {"stride": 3, "ceil_mode": True, "count_include_pad": False})
    yield Sample((make(2, 1, 1), 1))


def _avg_pool2d_samples(make: Maker) -> Iterator[Sample]:
    # PoolFormer's token mixer: a 3x3 window, stride 1, the padding left out of the count
    yield Sample((make(2, 3, 6, 5), 3), {"stride": 1, "padding": 1, "count_include_pad": False})
    yield Sample((make(2, 1, 7, 5), 2), {"stride": 2, "ceil_mode": True})  # Funnel's pooling of a dim of 7
    yield Sample((make(3, 5, 6, transposed=True), (3, 2)), {"stride": (2, 1), "padding": (1, 1), "ceil_mode": True})
    yield Sample((make(1, 2, 6, 6), 3), {"stride": 2, "padding": 1, "divisor_override": 4})
    yield Sample((make(2, 2, 1, 4), (1, 2)), {"stride": 1})
    yield Sample((make(1, 1, 5, 5, noncontiguous=True), 4), {"stride": 3, "padding": 2, "ceil_mode": True})


def _avg_pool3d_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(1, 2, 4, 5, 6), 2))
    yield Sample((make(2, 3, 5, 4), (3, 2, 2)), {"stride": 2, "padding": 1, "ceil_mode": True})
    yield Sample((make(1, 1, 3, 4, 4), 3), {"stride": (1, 2, 2), "padding": 1, "count_include_pad": False})


def _max_pool1d_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(2, 3, 9), 3))
    yield Sample((make(2, 3, 8), 3), {"stride": 2, "padding": 1, "dilation": 2, "ceil_mode": True})
    yield Sample((make(3, 7, noncontiguous=True), 2), {"stride": 1})  # unbatched
    yield Sample((make.small_values(2, 2, 9), 4), {"stride": 3, "padding": 2, "ceil_mode": True})  # ties


def _max_pool2d_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(2, 3, 8, 8), 3, 2, 1))  # a ResNet's stem
    yield Sample((make(3, 7, 6), 2))
    yield Sample((make(1, 2, 7, 7, noncontiguous=True), (3, 2)), {"stride": (1, 2), "dilation": (2, 1)})
    yield Sample((make.small_values(2, 2, 6, 6), 2))  # ties
    yield Sample((make(2, 2, 5, 5), 2), {"stride": 1, "ceil_mode": True})  # HGNet's stem
    yield Sample((make(1, 3, 5, 4, transposed=True), 3), {"stride": 2, "padding": 1, "ceil_mode": True})
    yield Sample((make(2, 1, 1, 3), 1))  # one-element windows: a new tensor all the same


def _max_pool3d_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(1, 2, 4, 5, 6), 2))
    yield Sample((make(2, 4, 5, 5), (2, 3, 2)), {"stride": 2, "padding": 1, "dilation": (1, 1, 2), "ceil_mode": True})


def _with_indices_samples(samples: Callable[[Maker], Iterator[Sample]]) -> Callable[[Maker], Iterator[Sample]]:
    def with_indices(make: Maker) -> Iterator[Sample]:
        for sample in samples(make):
            yield Sample(sample.args, {**sample.kwargs, "return_indices": True})

    return with_indices


# NOTE: eager pools int64 too (an average with a truncating division), but max_pool1d only floats
_builtin_with_indices = named(
    "torch.max_pool1d_with_indices",
    lambda input, *args, return_indices=True, **kwargs: torch.max_pool1d_with_indices(input, *args, **kwargs),
)


def _unfold_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(2, 3, 5, 6), 3))
    yield Sample((make(2, 4, 9, 1), (9, 1)), {"padding": (4, 0)})  # ConvBERT's span-based convolution
    yield Sample((make(3, 7, 8), (2, 3)), {"dilation": (2, 1), "padding": 1, "stride": (2, 3)})  # unbatched
    yield Sample((make(1, 2, 4, 4, noncontiguous=True), 4))  # one block
    yield Sample((make(2, 1, 6, 5), 2), {"stride": 2})  # blocks side by side


CASES = [
    OpCase("nn_functional_unfold", (F.unfold,), _unfold_samples, FLOATS),
    OpCase("adaptive_avg_pool1d", (torch.adaptive_avg_pool1d,), _adaptive_pool1d_samples, FLOATS),
    OpCase("adaptive_avg_pool2d", (F.adaptive_avg_pool2d,), _adaptive_pool2d_samples, FLOATS),
    OpCase("avg_pool1d", (F.avg_pool1d,), _avg_pool1d_samples, (*FLOATS, torch.int64)),
    OpCase("avg_pool2d", (F.avg_pool2d,), _avg_pool2d_samples, (*FLOATS, torch.int64)),
    OpCase("avg_pool3d", (F.avg_pool3d,), _avg_pool3d_samples, (torch.float32, torch.float64, torch.int64)),
    OpCase("max_pool1d", (F.max_pool1d, torch.max_pool1d), _max_pool1d_samples, FLOATS),
    OpCase("max_pool2d", (F.max_pool2d, torch.max_pool2d), _max_pool2d_samples, (*FLOATS, torch.int64)),
    OpCase("max_pool3d", (F.max_pool3d, torch.max_pool3d), _max_pool3d_samples, (*FLOATS, torch.int64)),
    OpCase(
        "max_pool1d_with_indices",
        (F.max_pool1d, F.max_pool1d_with_indices, _builtin_with_indices),
        _with_indices_samples(_max_pool1d_samples),
        FLOATS,
    ),
    OpCase(
        "max_pool2d_with_indices",
        (F.max_pool2d, F.max_pool2d_with_indices),
        _with_indices_samples(_max_pool2d_samples),
        (*FLOATS, torch.int64),
    ),
    OpCase(
        "max_pool3d_with_indices",
        (F.max_pool3d, F.max_pool3d_with_indices),
        _with_indices_samples(_max_pool3d_samples),
        FLOATS,
    ),
]
