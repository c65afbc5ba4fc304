"""Gradients of pooling (adaptive average, and average and max over sliding windows) and of F.unfold against eager on
random inputs, several seeds, with the arguments that change which elements a gradient reaches:
padding, ceil_mode's extra windows, count_include_pad, divisor_override, dilation; ties (the max's
gradient goes to its window's first maximum, as eager's), non-contiguous and size-1 inputs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import compiler

CASES = [
    (F.adaptive_avg_pool1d, (2, 3, 7), {"output_size": 3}),
    (F.adaptive_avg_pool1d, (2, 3, 8), {"output_size": 1}),
    (F.adaptive_avg_pool2d, (2, 3, 6, 5), {"output_size": (4, 2)}),
    (F.avg_pool1d, (2, 3, 8), {"kernel_size": 2}),
    (F.avg_pool1d, (3, 7), {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}),
    (F.avg_pool2d, (2, 3, 6, 5), {"kernel_size": 3, "stride": 1, "padding": 1, "count_include_pad": False}),
    (F.avg_pool2d, (1, 2, 7, 5), {"kernel_size": 2, "ceil_mode": True}),
    (F.avg_pool2d, (2, 5, 6), {"kernel_size": (3, 2), "stride": (2, 1), "padding": 1, "divisor_override": 5}),
    (F.avg_pool3d, (1, 2, 3, 5, 4), {"kernel_size": 2, "stride": 1, "padding": 1, "ceil_mode": True}),
    (F.max_pool1d, (2, 3, 9), {"kernel_size": 3, "stride": 2, "padding": 1, "dilation": 2, "ceil_mode": True}),
    (F.max_pool2d, (2, 3, 8, 8), {"kernel_size": 3, "stride": 2, "padding": 1}),
    (F.max_pool2d, (3, 7, 7), {"kernel_size": (3, 2), "dilation": (2, 1)}),
    (F.max_pool2d, (2, 2, 5, 5), {"kernel_size": 2, "stride": 1, "ceil_mode": True}),
    (F.max_pool2d, (1, 1, 5, 4), {"kernel_size": 3, "stride": 2, "padding": 1, "return_indices": True}),
    (F.max_pool3d, (1, 2, 4, 5, 3), {"kernel_size": 2, "stride": (1, 2, 2), "ceil_mode": True}),
    # im2col's blocks: overlapping (each element in several columns), padded, dilated, strided, unbatched
    (F.unfold, (2, 3, 9, 1), {"kernel_size": (9, 1), "padding": (4, 0)}),  # ConvBERT's span convolution
    (F.unfold, (3, 6, 7), {"kernel_size": (2, 3), "dilation": (2, 1), "padding": 1, "stride": (2, 3)}),
]


def _first(output: Any) -> torch.Tensor:
    return output[0] if isinstance(output, tuple) else output


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(("pool", "shape", "kwargs"), CASES, ids=lambda v: getattr(v, "__name__", None))
def test_pooling_gradients_match_eager(pool: Callable, shape: tuple, kwargs: dict, seed: int) -> None:
    torch.manual_seed(seed)
    x = torch.randn(shape, dtype=torch.float64)
    if seed == 1:
        x = x.clamp(min=0.0)  # windows of equal zeros: ties
    if seed == 2:
        x = x.mT.contiguous().mT  # non-contiguous
    x.requires_grad_()
    weights = torch.randn(_first(pool(x, **kwargs)).shape, dtype=torch.float64)
    fn = lambda x, w: (_first(pool(x, **kwargs)) * w).sum()
    (got,) = torch.autograd.grad(compiler.jit(fn)(x, weights), x)
    (expected,) = torch.autograd.grad(fn(x, weights), x)
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-10)


def test_max_pool_index_and_gradient_reach_an_input_minus_inf_beside_padding() -> None:
    # NOTE: padding holds -inf too; the window's input element must still be the one chosen
    x = torch.tensor([[[-torch.inf, 1.0, -torch.inf]]], requires_grad=True)
    fn = lambda x: F.max_pool1d(x, 2, stride=2, padding=1, return_indices=True)
    got, expected = compiler.jit(fn)(x), fn(x)
    torch.testing.assert_close(got[1], expected[1])
    (got_grad,) = torch.autograd.grad(got[0].sum(), x)
    (expected_grad,) = torch.autograd.grad(expected[0].sum(), x)
    torch.testing.assert_close(got_grad, expected_grad)


SYMBOLIC_CASES = {
    "max_pool2d": (lambda x: F.max_pool2d(x, 2), 2),
    "MaxPool2d ceil_mode": (torch.nn.MaxPool2d(3, 2, 1, ceil_mode=True), 2),
    "max_pool1d indices": (lambda x: F.max_pool1d(x, 3, 2, 1, dilation=2, ceil_mode=True, return_indices=True), 1),
    "avg_pool1d": (lambda x: F.avg_pool1d(x, 2), 1),
    "avg_pool2d ceil_mode": (lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), 2),
    "unfold": (lambda x: F.unfold(x, (3, 2), dilation=(2, 1), padding=1, stride=(2, 1)), 2),
}


@pytest.mark.parametrize("name", sorted(SYMBOLIC_CASES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_pooling_over_a_symbolic_size_compiles_twice(name: str, dtype: torch.dtype) -> None:
    """The output size (F.unfold's block counts) is eager's formula of a symbolic size (ceil_mode's
    last window kept only where it starts inside the input or its left padding), and the window
    counts and first positions are computed over the output: automatic dynamic serves every size
    with one entry, where the windows read the size as an int and recompiled per size."""
    pool, pooled = SYMBOLIC_CASES[name]
    jfn = compiler.jit(pool)
    for seed, n in enumerate((7, 8, 11, 12, 9)):
        x = torch.randn((2, 1, n, n + 3)[-pooled - 2 :], generator=torch.Generator().manual_seed(seed)).to(dtype)
        x = x.clamp(min=0.0) if seed % 2 else x.mT.contiguous().mT  # ties, or not contiguous
        results = []
        for fn in (jfn, pool):
            leaf = x.detach().requires_grad_()
            out = fn(leaf)
            weights = torch.randn(_first(out).shape, generator=torch.Generator().manual_seed(seed)).to(dtype)
            results.append((out, torch.autograd.grad((_first(out) * weights).sum(), leaf)[0]))
        torch.testing.assert_close(results[0][0], results[1][0])
        # NOTE: eager's bf16 backward rounds as it accumulates, where the decomposition's accumulates in float32
        tolerance = {"rtol": 1.6e-2, "atol": 2e-2} if dtype == torch.bfloat16 else {}
        torch.testing.assert_close(results[0][1], results[1][1], **tolerance)
    assert len(jfn.entries) == 2, compiler.examine.recompilations(jfn)  # the first call's, then one symbolic


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_adaptive_pooling_over_a_symbolic_size_its_output_divides_compiles_twice(dtype: torch.dtype) -> None:
    """Windows that tile a symbolic size (the output size dividing it, guarded) are a reshape and a
    mean over the size as it is, where it was read as an int; a dim given as None is kept."""
    pool = lambda x: F.adaptive_avg_pool2d(x, (None, 4)) + F.adaptive_avg_pool2d(x, (1, 2)).mean()
    jfn = compiler.jit(pool)
    for seed, n in enumerate((8, 12, 16, 24)):
        x = torch.randn(2, 3, n + 1, n, generator=torch.Generator().manual_seed(seed)).to(dtype).mT.contiguous().mT
        got, want = (x.detach().requires_grad_() for _ in range(2))
        got_out, want_out = jfn(got), pool(want)
        torch.testing.assert_close(got_out, want_out)
        (got_grad,), (want_grad,) = torch.autograd.grad(got_out.sum(), got), torch.autograd.grad(want_out.sum(), want)
        torch.testing.assert_close(got_grad, want_grad)
    assert len(jfn.entries) == 2, compiler.examine.recompilations(jfn)  # the first call's, then one symbolic
