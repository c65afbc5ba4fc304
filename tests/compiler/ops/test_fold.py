"""F.fold / nn.Fold (col2im) against eager on random columns: kernel, stride, padding and dilation
variants, unbatched, size-1 and non-contiguous inputs, float32 and bfloat16, gradients; fold of
unfold; a wrong number of columns names the op."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import compiler

CONFIGS = [
    pytest.param((2, 3 * 4, 12), (4, 5), (2, 2), {}, id="overlapping"),
    pytest.param((3 * 6, 6), (5, 4), (2, 3), {"stride": 2, "padding": 1}, id="unbatched-strided-padded"),
    pytest.param((1, 2 * 4, 16), (7, 7), 2, {"dilation": 2, "stride": 2, "padding": 1}, id="dilated"),
    pytest.param((1, 1, 1), (1, 1), 1, {}, id="size-one"),
    pytest.param((2, 2 * 3, 4), (1, 4), (1, 3), {"padding": (0, 1)}, id="one-row"),
]


def _tolerance(dtype: torch.dtype) -> dict:
    return {"rtol": 2e-2, "atol": 2e-2} if dtype == torch.bfloat16 else {"rtol": 1e-5, "atol": 1e-5}


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("shape", "output_size", "kernel_size", "kwargs"), CONFIGS)
def test_fold_and_its_gradient_match_eager(
    shape: tuple, output_size: tuple, kernel_size: object, kwargs: dict, dtype: torch.dtype, seed: int
) -> None:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=generator).to(dtype).requires_grad_()
    fn = lambda x: F.fold(x, output_size, kernel_size, **kwargs)
    got, want = compiler.jit(fn)(x), fn(x)
    assert got.shape == want.shape and got.dtype == want.dtype
    torch.testing.assert_close(got, want, **_tolerance(dtype))
    cotangent = torch.randn(want.shape, generator=generator).to(dtype)
    torch.testing.assert_close(
        torch.autograd.grad(got, x, cotangent)[0], torch.autograd.grad(want, x, cotangent)[0], **_tolerance(dtype)
    )


def test_the_module_on_non_contiguous_columns() -> None:
    module = torch.nn.Fold((4, 4), 2, stride=2)
    x = torch.randn(2, 4, 12).transpose(1, 2).requires_grad_()  # [2, 12, 4], not contiguous
    got, want = compiler.jit(module)(x), module(x)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(torch.autograd.grad(got.sin().sum(), x)[0], torch.autograd.grad(want.sin().sum(), x)[0])


def test_fold_of_unfold_counts_each_pixels_blocks() -> None:
    fn = lambda x: F.fold(F.unfold(x, 3, padding=1), (5, 6), 3, padding=1)
    x = torch.randn(1, 2, 5, 6)
    torch.testing.assert_close(compiler.jit(fn)(x), fn(x))


def test_a_wrong_number_of_columns_names_the_op() -> None:
    with pytest.raises(RuntimeError, match=r"F.fold: .* 3 x 4 columns"):
        compiler.jit(lambda x: F.fold(x, (4, 5), 2))(torch.randn(1, 4, 11))
