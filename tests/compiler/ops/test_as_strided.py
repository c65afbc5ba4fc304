"""torch.as_strided / Tensor.as_strided read over a contiguous tensor, against eager: windows,
overlapping and repeated positions (stride 0), a storage offset on a tensor the program made,
size-1 and empty sizes, float32 and bfloat16, gradients; and the layouts and writes it refuses."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import compiler

CASES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "rows_window": lambda x: x.as_strided((x.shape[0], 2), (x.stride(0), 1)) * 2,
    "overlapping": lambda x: torch.as_strided(x, (3, 3), (1, 1)).exp(),
    "broadcast": lambda x: x.as_strided((2, 3, 2), (0, 2, 1)),
    "offset_on_a_made_tensor": lambda x: (x * 2).as_strided((2, 2), (3, 1), 1),
    "size_one_and_scalar": lambda x: x.as_strided((1, 4, 1), (9, 1, 5)) + (x + 1).as_strided((), (), 7),
    "empty": lambda x: x.as_strided((0, 3), (1, 1)),
    "transposed_read": lambda x: x.as_strided((4, 3), (1, 4)).sin(),
    "of_a_contiguous_copy": lambda x: x.t().contiguous().as_strided((3, 2), (2, 1)),
}


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", list(CASES))
def test_reads_and_gradients_match_eager(name: str, dtype: torch.dtype, seed: int) -> None:
    fn = CASES[name]
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(3, 4, generator=generator).to(dtype).requires_grad_()
    got, want = compiler.jit(fn)(x), fn(x)
    assert got.shape == want.shape and got.dtype == want.dtype
    torch.testing.assert_close(got, want)
    if want.numel():
        cotangent = torch.randn(want.shape, generator=generator).to(dtype)
        (grad,), (expected,) = torch.autograd.grad(got, x, cotangent), torch.autograd.grad(want, x, cotangent)
        torch.testing.assert_close(grad, expected)


def test_a_non_contiguous_slice_of_a_contiguous_input() -> None:
    x = torch.randn(4, 6)[1:]  # contiguous rows, a storage offset of 6
    fn = lambda x: x.as_strided((3, 2), (6, 2))
    torch.testing.assert_close(compiler.jit(fn)(x), fn(x))


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (lambda x: x.t().as_strided((2,), (1,)), "only a contiguous tensor is supported"),
        (lambda x: x.as_strided((2,), (1,), 1), "storage_offset=1 counts from the start"),
        (lambda x: x.as_strided((4, 4), (4, 1)), r"reach element 15 of x, which has 12 elements"),
    ],
    ids=["transposed", "offset_of_an_argument", "past_the_end"],
)
def test_what_cannot_be_read_exactly_is_refused_naming_the_op(fn: Callable, message: str) -> None:
    with pytest.raises(NotImplementedError, match=rf"torch.as_strided: .*{message}"):
        compiler.jit(fn)(torch.randn(3, 4))


def test_a_write_into_the_result_is_refused() -> None:
    def write(x: torch.Tensor) -> torch.Tensor:
        h = x.clone()
        h.as_strided((2,), (1,)).zero_()
        return h

    with pytest.raises(NotImplementedError, match="made by as_strided"):
        compiler.jit(write)(torch.randn(3, 4))
