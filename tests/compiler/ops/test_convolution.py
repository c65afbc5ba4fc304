"""Convolutions under autodiff: input, weight and bias gradients against eager on random inputs,
and the input's gradient left out of the backward where the input needs none."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import compiler
from compiler.prims import Prim
from compiler.tracing.frontend import leaves

CONFIGS = [
    pytest.param(1, (2, 4, 11), (6, 4, 3), {"stride": 2, "padding": 1}, id="1d-strided"),
    pytest.param(1, (4, 10), (4, 2, 3), {"groups": 2, "dilation": 2}, id="1d-unbatched-grouped"),
    pytest.param(2, (2, 3, 8, 8), (4, 3, 4, 4), {"stride": 4}, id="2d-patches"),
    pytest.param(2, (1, 4, 7, 6), (4, 1, 3, 3), {"padding": 1, "groups": 4}, id="2d-depthwise"),
    pytest.param(2, (2, 2, 6, 6), (3, 2, 2, 2), {"padding": "same"}, id="2d-same-even-kernel"),
    pytest.param(3, (1, 2, 4, 5, 6), (3, 2, 2, 3, 3), {"padding": (0, 1, 1)}, id="3d"),
]


def _conv(spatial: int, **kwargs: Any) -> Any:
    conv = getattr(torch.nn.functional, f"conv{spatial}d")
    return lambda x, w, b: conv(x, w, b, **kwargs).tanh().square().sum()


@pytest.mark.filterwarnings("ignore:Using padding=.same. with even kernel:UserWarning")
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("spatial", "input_shape", "weight_shape", "kwargs"), CONFIGS)
def test_gradients_match_eager(
    spatial: int, input_shape: tuple, weight_shape: tuple, kwargs: dict, dtype: torch.dtype, seed: int
) -> None:
    torch.manual_seed(seed)
    x = torch.randn(input_shape, dtype=dtype, requires_grad=True)
    w = torch.randn(weight_shape, dtype=dtype, requires_grad=True)
    b = torch.randn(weight_shape[0], dtype=dtype, requires_grad=True)
    fn = _conv(spatial, **kwargs)
    got = torch.autograd.grad(compiler.jit(fn)(x, w, b), (x, w, b))
    want = torch.autograd.grad(fn(x, w, b), (x, w, b))
    tolerance = {"rtol": 1e-4, "atol": 1e-5} if dtype == torch.float32 else {}
    for name, g, e in zip(("input", "weight", "bias"), got, want):
        torch.testing.assert_close(g, e, **tolerance, msg=lambda m, name=name: f"{name}: {m}")


def test_an_input_without_gradient_gets_no_input_gradient_line() -> None:
    x = torch.randn(2, 3, 8, 8)
    w = torch.randn(4, 3, 4, 4, requires_grad=True)
    b = torch.randn(4, requires_grad=True)
    jfn = compiler.jit(_conv(2, stride=4))
    jfn(x, w, b).backward()
    backward = compiler.last_backward_traces(jfn)[-1]
    masks = [bsym.args[-1] for bsym in leaves(backward.bsyms) if bsym.sym is Prim.CONVOLUTION_BACKWARD]
    assert masks == [(False, True, True)]
    eager_w = w.detach().clone().requires_grad_()
    _conv(2, stride=4)(x, eager_w, b.detach()).backward()
    torch.testing.assert_close(w.grad, eager_w.grad, rtol=1e-4, atol=1e-5)


def test_mismatched_channels_name_the_operands() -> None:
    jfn = compiler.jit(lambda x, w: torch.conv2d(x, w))
    with pytest.raises(ValueError, match=r"prims.convolution: .* has 3 channels, weight .* expects 2 x 1 groups"):
        jfn(torch.randn(1, 3, 4, 4), torch.randn(2, 2, 3, 3))


def test_an_input_smaller_than_the_kernel_raises_eagers_runtime_error() -> None:
    # a speech model's feature extractor called on 8 samples: a program catching eager's error works
    conv = lambda x, w: torch.conv1d(x, w, stride=5)
    x, w = torch.randn(2, 1, 8), torch.randn(4, 1, 10)
    with pytest.raises(RuntimeError, match="Kernel size can't be greater than actual input size"):
        conv(x, w)
    with pytest.raises(RuntimeError, match=r"prims.convolution: .* is smaller than the \(dilated\) kernel \[10\]"):
        compiler.jit(conv)(x, w)
