"""Elementwise ops written with prims (compiler/ops/numeric_compositions.py): fmax / fmin and sinc
against eager, values (NaN placement, integer and mixed dtypes) and gradients (ties go to input)."""

from __future__ import annotations

import pytest
import torch

import compiler
from tests.support.eager_match import assert_matches_eager

NAN = float("nan")


def _with_nans_and_ties(seed: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    a, b = torch.randn(2, 4, 6, generator=generator).unbind(0)
    a[0, :3], b[0, 1:4] = NAN, NAN
    b[1] = a[1]  # ties
    return a.to(dtype), b.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("op", [torch.fmax, torch.fmin])
def test_fmax_fmin_keep_the_number_beside_a_nan_and_give_ties_to_input(op, seed: int, dtype: torch.dtype) -> None:
    a, b = _with_nans_and_ties(seed, dtype)
    assert_matches_eager(lambda a, b: op(a, b.mT.mT), a, b, seed=seed, equal_nan=True)
    assert_matches_eager(lambda a, b: op(a[:, :1], b) + getattr(a, op.__name__)(b[0]), a, b, equal_nan=True)


def test_fmax_fmin_integer_and_mixed_dtypes_match_eager() -> None:
    i, f = torch.randint(-5, 5, (3, 4)), torch.tensor([NAN, 1.5, -2.0, 0.0])
    for fn in (torch.fmax, torch.fmin):
        for args in ((i, i.flip(0)), (i, f), (f.to(torch.bfloat16), f[1:2])):
            got, want = compiler.jit(fn)(*args), fn(*args)
            assert got.dtype == want.dtype
            torch.testing.assert_close(got, want, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sinc_matches_eager_with_zero_and_its_gradient(seed: int, dtype: torch.dtype) -> None:
    x = (torch.randn(5, 6, generator=torch.Generator().manual_seed(seed)) * 3).to(dtype)
    x[0, :2] = 0.0
    x[1, 0] = 1.0
    assert_matches_eager(
        lambda x: torch.sinc(x.mT) + x.sinc().mT + torch.special.sinc(x[:, :1]).mT,
        x,
        seed=seed,
        reference=torch.float32,
    )


def test_sinc_of_integers_is_float() -> None:
    x = torch.arange(-3, 4)
    got = compiler.jit(torch.sinc)(x)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, torch.sinc(x))
