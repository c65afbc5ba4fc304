"""F.affine_grid and F.grid_sample (2-D and 3-D) against eager on random inputs: modes bilinear,
nearest and bicubic (2-D, as eager), padding modes zeros, border and reflection (grid points beyond
[-1, 1]), align_corners both ways, size-1 dims; outputs, the input's gradient, and (bilinear and
bicubic, float32/float64) the grid's; bfloat16 outputs (bicubic's rounded step by step, as eager's
kernel) and input gradients; affine_grid's theta gradient; 3-D bicubic refused as eager refuses it."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F

import compiler

SHAPES = {2: ((2, 3, 4, 5), (2, 3, 1, 2)), 3: ((1, 2, 3, 1, 4), (1, 2, 3, 2, 3))}
PADDINGS = ("zeros", "border", "reflection")
CASES = [
    *itertools.product((2, 3), ("bilinear", "nearest"), PADDINGS, (False, True)),
    *itertools.product((2,), ("bicubic",), PADDINGS, (False, True)),
]


def _tolerance(dtype: torch.dtype) -> dict:
    return {"rtol": 2e-2, "atol": 3e-2} if dtype == torch.bfloat16 else {"rtol": 1e-4, "atol": 1e-5}


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize(("spatial", "mode", "padding_mode", "align_corners"), CASES)
def test_grid_sample_and_gradients_match_eager(
    spatial: int, mode: str, padding_mode: str, align_corners: bool, dtype: torch.dtype, seed: int
) -> None:
    generator = torch.Generator().manual_seed(seed)
    input_shape, grid_shape = SHAPES[spatial]
    x = torch.randn(input_shape, generator=generator).to(dtype).requires_grad_()
    grid = (torch.rand(grid_shape, generator=generator) * 2.6 - 1.3).to(dtype).requires_grad_()

    def fn(x: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
        return F.grid_sample(x, grid, mode=mode, padding_mode=padding_mode, align_corners=align_corners)

    got, want = compiler.jit(fn)(x, grid), fn(x, grid)
    assert got.shape == want.shape and got.dtype == want.dtype
    torch.testing.assert_close(got, want, **_tolerance(dtype))
    cotangent = torch.randn(want.shape, generator=generator).to(dtype)
    # NOTE: eager's bf16 grid gradient sums over channels in bf16: compared in float32 and float64 only
    inputs = (x, grid) if mode != "nearest" and dtype != torch.bfloat16 else (x,)
    for g, e in zip(torch.autograd.grad(got, inputs, cotangent), torch.autograd.grad(want, inputs, cotangent)):
        torch.testing.assert_close(g, e, **_tolerance(dtype))


@pytest.mark.filterwarnings("ignore:Since version 1.3.0, affine_grid behavior has changed:UserWarning")
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("size", [[2, 3, 4, 5], [2, 1, 1, 3], [2, 3, 2, 1, 4]], ids=["2d", "2d-size-one", "3d"])
def test_affine_grid_and_its_theta_gradient_match_eager(size: list[int], align_corners: bool) -> None:
    spatial = len(size) - 2
    theta = torch.randn(2, spatial, spatial + 1, generator=torch.Generator().manual_seed(0), requires_grad=True)
    fn = lambda theta: F.affine_grid(theta, size, align_corners=align_corners)
    got, want = compiler.jit(fn)(theta), fn(theta)
    torch.testing.assert_close(got, want)
    cotangent = torch.randn(want.shape, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(
        torch.autograd.grad(got, theta, cotangent)[0], torch.autograd.grad(want, theta, cotangent)[0]
    )


def test_an_affine_warp_end_to_end() -> None:
    def warp(x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
        return F.grid_sample(x, F.affine_grid(theta, list(x.shape), align_corners=False), align_corners=False)

    x = torch.randn(2, 3, 5, 4, requires_grad=True)
    theta = (torch.eye(2, 3) + 0.1 * torch.randn(2, 2, 3)).requires_grad_()
    got, want = compiler.jit(warp)(x, theta), warp(x, theta)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    for g, e in zip(torch.autograd.grad(got.sum(), (x, theta)), torch.autograd.grad(want.sum(), (x, theta))):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-4)


def test_bicubic_bfloat16_rounds_each_step_as_eager() -> None:
    # NOTE: eager's CPU kernel computes bicubic weights and sums in bfloat16: float32 differs by ~0.1 here
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 4, 5, generator=generator).bfloat16()
    grid = (torch.rand(2, 3, 4, 2, generator=generator) * 2.6 - 1.3).bfloat16()
    fn = lambda x, g: F.grid_sample(x, g, mode="bicubic", align_corners=False)
    torch.testing.assert_close(compiler.jit(fn)(x, grid), fn(x, grid), rtol=0, atol=0)


def test_bicubic_of_a_3d_input_is_refused_as_eager() -> None:
    fn = lambda x, g: F.grid_sample(x, g, mode="bicubic", align_corners=False)
    x, grid = torch.randn(1, 1, 2, 3, 3), torch.zeros(1, 2, 2, 2, 3)
    with pytest.raises(RuntimeError, match="bicubic interpolation only supports 4D input"):
        fn(x, grid)
    with pytest.raises(RuntimeError, match=r"F\.grid_sample: bicubic interpolation only supports 4-d input"):
        compiler.jit(fn)(x, grid)
