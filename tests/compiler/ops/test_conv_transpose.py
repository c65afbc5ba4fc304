"""Transposed convolutions (F.conv_transpose1d/2d/3d, nn.ConvTranspose*d) against eager on random
inputs: stride, padding, output_padding (below the stride, and up to the dilation), groups, dilation,
bias, unbatched and non-contiguous inputs; outputs and the input, weight and bias gradients; int64
tensors and bfloat16's bias added before rounding, as eager's kernel does."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

import compiler
from compiler import prims
from compiler.prims import Prim
from compiler.tracing.frontend import leaves

CONFIGS = [
    pytest.param(1, (2, 4, 5), (4, 3, 3), {"stride": 2, "padding": 1, "output_padding": 1}, id="1d-strided"),
    pytest.param(1, (4, 5), (4, 2, 3), {"groups": 2, "dilation": 2}, id="1d-unbatched-grouped"),
    pytest.param(1, (1, 1, 1), (1, 1, 1), {}, id="1d-size-one"),
    pytest.param(
        2,
        (2, 4, 3, 4),
        (4, 2, 2, 3),
        {"stride": (2, 3), "padding": (0, 1), "output_padding": (1, 2), "groups": 2},
        id="2d-grouped-output-padding",
    ),
    pytest.param(
        2, (1, 2, 3, 3), (2, 3, 3, 3), {"dilation": 3, "output_padding": 2, "padding": 2}, id="2d-op-beyond-stride"
    ),
    pytest.param(2, (1, 3, 4, 4), (3, 1, 2, 2), {"stride": 2, "groups": 3}, id="2d-depthwise"),
    pytest.param(3, (1, 2, 2, 3, 2), (2, 2, 2, 2, 3), {"stride": 2, "padding": (0, 1, 1)}, id="3d"),
]


def _transposed(spatial: int, **kwargs: Any) -> Any:
    conv = getattr(F, f"conv_transpose{spatial}d")
    return lambda x, w, b: conv(x, w, b, **kwargs)


def _tolerance(dtype: torch.dtype) -> dict:
    return {"rtol": 2e-2, "atol": 5e-2} if dtype == torch.bfloat16 else {"rtol": 1e-4, "atol": 1e-5}


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("spatial", "input_shape", "weight_shape", "kwargs"), CONFIGS)
def test_outputs_and_gradients_match_eager(
    spatial: int, input_shape: tuple, weight_shape: tuple, kwargs: dict, dtype: torch.dtype, seed: int
) -> None:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(input_shape, generator=generator).to(dtype).requires_grad_()
    w = torch.randn(weight_shape, generator=generator).to(dtype).requires_grad_()
    b = torch.randn(weight_shape[1] * kwargs.get("groups", 1), generator=generator).to(dtype).requires_grad_()
    fn = _transposed(spatial, **kwargs)
    got, want = compiler.jit(fn)(x, w, b), fn(x, w, b)
    assert got.shape == want.shape and got.dtype == want.dtype
    torch.testing.assert_close(got, want, **_tolerance(dtype))
    cotangent = torch.randn(want.shape, generator=generator).to(dtype)
    grads = torch.autograd.grad(got, (x, w, b), cotangent)
    expected = torch.autograd.grad(want, (x, w, b), cotangent)
    for name, g, e in zip(("input", "weight", "bias"), grads, expected):
        torch.testing.assert_close(g, e, **_tolerance(dtype), msg=lambda m, name=name: f"{name}: {m}")


def test_a_non_contiguous_input_without_bias() -> None:
    x = torch.randn(2, 5, 3, 4).transpose(2, 3).requires_grad_()  # [2, 5, 4, 3], not contiguous
    w = torch.randn(5, 2, 3, 2, requires_grad=True)
    fn = lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1).sin()
    got, want = compiler.jit(fn)(x, w), fn(x, w)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    for g, e in zip(torch.autograd.grad(got.sum(), (x, w)), torch.autograd.grad(want.sum(), (x, w))):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("spatial", [1, 2, 3])
def test_modules_with_output_size_match_eager(spatial: int) -> None:
    torch.manual_seed(spatial)
    module = getattr(torch.nn, f"ConvTranspose{spatial}d")(4, 6, 3, stride=2, padding=1, groups=2)
    x = torch.randn(2, 4, *[3] * spatial, requires_grad=True)
    output_size = [6] * spatial  # needs output_padding 1 along each dim
    got, want = compiler.jit(module)(x, output_size=output_size), module(x, output_size=output_size)
    assert got.shape == want.shape == (2, 6, *output_size)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    params = (x, module.weight, module.bias)
    for g, e in zip(torch.autograd.grad(got.sum(), params), torch.autograd.grad(want.sum(), params)):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-5)


def test_the_forward_is_one_transposed_convolution_with_its_bias() -> None:
    jfn = compiler.jit(lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2))
    jfn(torch.randn(1, 3, 4, 4), torch.randn(3, 2, 3, 3), torch.randn(2))
    trace = compiler.last_traces(jfn)[-1]
    syms = [b.sym for b in leaves(trace.bsyms) if b.sym in prims.LIBRARY or b.sym is Prim.ADD]
    assert syms == [Prim.CONVOLUTION_TRANSPOSE]


@pytest.mark.parametrize("spatial", [1, 2, 3])
def test_int64_matches_eager(spatial: int) -> None:
    generator = torch.Generator().manual_seed(spatial)
    x = torch.randint(-9, 9, (2, 4, *[3] * spatial), generator=generator)
    w = torch.randint(-9, 9, (4, 3, *[2] * spatial), generator=generator)
    b = torch.randint(-9, 9, (6,), generator=generator)
    fn = _transposed(spatial, stride=2, padding=1, output_padding=1, groups=2)
    got = compiler.jit(fn)(x, w[:, :3], b)
    assert got.dtype == torch.int64
    assert torch.equal(got, fn(x, w[:, :3], b))


@pytest.mark.parametrize("spatial", [1, 2, 3])
def test_bfloat16_bias_is_added_before_rounding_as_eager(spatial: int) -> None:
    # NOTE: a bias far larger than the products: rounding the products first and adding after differs
    generator = torch.Generator().manual_seed(spatial)
    x = torch.randn(2, 3, *[4] * spatial, generator=generator).bfloat16()
    w = torch.randn(3, 4, *[3] * spatial, generator=generator).bfloat16()
    b = (torch.randn(4, generator=generator) * 30).bfloat16()
    fn = _transposed(spatial, stride=2, padding=1)
    torch.testing.assert_close(compiler.jit(fn)(x, w, b), fn(x, w, b), rtol=0, atol=0)


def test_an_output_padding_too_large_names_the_op() -> None:
    jfn = compiler.jit(lambda x, w: F.conv_transpose1d(x, w, stride=2, output_padding=2))
    with pytest.raises(ValueError, match=r"torch.conv_transpose1d: .*output_padding < max\(stride"):
        jfn(torch.randn(1, 2, 4), torch.randn(2, 2, 3))
