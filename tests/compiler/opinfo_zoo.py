"""Op cases for the ops Hugging Face models reach beyond the core ones: convolutions (audio and
vision front ends) and tensors built from Python data (`torch.tensor`, `torch.as_tensor`,
`torch.scalar_tensor`: caches, masks, positions). Gradients of convolutions are checked in
tests/compiler/ops/test_convolution.py."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from tests.compiler.opinfo import ALL, FLOATS, Maker, OpCase, Sample, named

CONV_TOL = {torch.float32: (1e-4, 1e-5), torch.float64: (1e-7, 1e-7), torch.bfloat16: (2e-2, 2e-2)}


def _conv1d_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(2, 4, 9), make(6, 4, 3)))
    yield Sample((make(2, 4, 9), make(6, 4, 3), make(6)), {"stride": 2, "padding": 1})
    yield Sample((make(4, 9, noncontiguous=True), make(6, 2, 3)), {"groups": 2, "dilation": 2})  # unbatched
    yield Sample((make(1, 4, 8), make(4, 1, 4), make(4)), {"padding": "same", "groups": 4})  # depthwise, odd total
    yield Sample((make(2, 4, 8), make(3, 4, 5)), {"padding": "valid"})


def _conv2d_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(2, 3, 8, 8), make(4, 3, 4, 4), make(4)), {"stride": 4})  # a ViT patch embedding
    yield Sample((make(1, 4, 7, 6), make(4, 1, 3, 3), make(4)), {"padding": 1, "groups": 4})  # ConvNeXt's depthwise
    yield Sample((make(2, 2, 6, 5, noncontiguous=True), make(3, 2, 2, 3)), {"stride": (2, 1), "dilation": (1, 2)})
    yield Sample((make(2, 6, 6), make(2, 2, 2, 2)), {"padding": "same"})
    yield Sample((make(2, 2, 5, 5).to(memory_format=torch.channels_last), make(3, 2, 3, 3)), {"padding": (1, 0)})


def _conv3d_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(1, 2, 4, 5, 6), make(3, 2, 2, 3, 3), make(3)), {"stride": (1, 2, 1), "padding": 1})


def _tensor_samples(make: Maker) -> Iterator[Sample]:
    dtype = make.dtype
    yield Sample(([],), {"dtype": dtype})  # DynamicCache's empty buffer
    yield Sample(([[1, 2, 3], [4, 5, 6]],), {"dtype": dtype})
    yield Sample(([0.5, 0.5, 0.5],), {"dtype": dtype})
    yield Sample((3,), {"dtype": dtype})
    yield Sample(([make(), make()],))  # 0-d tensors: their dtype, values without gradient
    yield Sample((make(2, 3),), {"dtype": dtype})


def _inferred_samples(make: Maker) -> Iterator[Sample]:
    yield Sample(([1, 2.5],))
    yield Sample(([True, False],))
    yield Sample(([[True], [2]],))
    yield Sample(([make(), 2],))
    yield Sample(([],))


def _as_tensor_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(2, 3),))
    yield Sample((make(2, 3),), {"dtype": torch.float64})
    yield Sample(([1, 2, 3],), {"dtype": make.dtype})


def _scalar_tensor_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((2,))
    yield Sample((-1.5,), {"dtype": make.dtype})


CASES = [
    OpCase("conv1d", (torch.conv1d,), _conv1d_samples, FLOATS, CONV_TOL),
    OpCase("conv2d", (torch.conv2d,), _conv2d_samples, FLOATS, CONV_TOL),
    OpCase("conv3d", (torch.conv3d,), _conv3d_samples, FLOATS, CONV_TOL),
    OpCase("tensor", (torch.tensor,), _tensor_samples, ALL),
    OpCase(
        "tensor_inferred",
        (named("torch.tensor", lambda data: torch.tensor(data)),),
        _inferred_samples,
        (torch.float32,),
    ),
    OpCase("as_tensor", (torch.as_tensor,), _as_tensor_samples, ALL),
    OpCase("scalar_tensor", (torch.scalar_tensor,), _scalar_tensor_samples, ALL),
]
