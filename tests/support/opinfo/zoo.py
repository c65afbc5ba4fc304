"""Op cases for the ops Hugging Face models reach beyond the core ones: convolutions (audio and
vision front ends), tensors built from Python data (`torch.tensor`, `torch.as_tensor`,
`torch.scalar_tensor`: caches, masks, positions), a mixture of experts' routing (histc, grouped
GEMMs), movedim, batch and weight normalisation (pooling: pooling.py). Gradients are checked in
tests/compiler/ops/test_convolution.py and test_zoo_op_gradients.py."""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F

from tests.support.opinfo.samples import ALL, FLOATS, Maker, OpCase, Sample, method, named

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
    yield Sample(([-1],), {"dtype": int})  # a Python type as the dtype, as transformers' caches pass it
    yield Sample(([0.5, 2],), {"dtype": float})


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


def _histc_samples(make: Maker) -> Iterator[Sample]:
    routed = make(12, dtype=torch.int64, low=0, high=4).to(make.dtype)  # expert ids, as Mixtral's
    yield Sample((routed,), {"bins": 4, "min": 0, "max": 3})
    yield Sample((make(3, 5),), {"bins": 7, "min": -2, "max": 2.5})  # values outside fall out
    yield Sample((make(6),), {"bins": 3, "min": -1, "max": 1})


def _grouped_mm_samples(make: Maker) -> Iterator[Sample]:
    # NOTE: torch's kernel wants 16-byte aligned strides: 8 and 16 wide rows
    offsets = torch.tensor([3, 3, 8], dtype=torch.int32)  # an expert with no rows
    yield Sample((make(8, 8), make(3, 8, 16)), {"offs": offsets})
    yield Sample((make(8, 16).mT, make(8, 16)), {"offs": offsets})  # the weights' gradient mode
    yield Sample((make(2, 8, 8), make(2, 8, 16)))  # no offsets: a batched matmul


def _movedim_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(2, 3, 4), 0, -1))
    yield Sample((make(2, 3, 4, 5), (0, 3), (2, 0)))
    yield Sample((make(2, 3), [], []))


def _weight_norm_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(6, 4, 5), make(1, 1, 5), 2))  # wav2vec2's positional convolution
    yield Sample((make(6, 4), make(6, 1), 0))
    yield Sample((make(6, 4), make(), -1))


def _batch_norm_samples(make: Maker) -> Iterator[Sample]:
    stats = lambda: (make(3), make(3, low=0.5, high=2.0))
    yield Sample((make(4, 3, 5, 5), *stats(), make(3), make(3)), {"training": False})
    yield Sample((make(4, 3, 6), *stats()), {"training": True, "momentum": 0.2})
    yield Sample((make(5, 3), None, None, make(3), None), {"training": True})


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
    OpCase("histc", (torch.histc, method("histc")), _histc_samples, (torch.float32, torch.float64)),
    OpCase("_grouped_mm", (torch._grouped_mm,), _grouped_mm_samples, (torch.float32,), CONV_TOL),
    OpCase("movedim", (torch.movedim, method("movedim"), torch.moveaxis, method("moveaxis")), _movedim_samples, ALL),
    OpCase("batch_norm", (F.batch_norm,), _batch_norm_samples, FLOATS, CONV_TOL),
    OpCase("_weight_norm", (torch._weight_norm,), _weight_norm_samples, FLOATS, CONV_TOL),
]
