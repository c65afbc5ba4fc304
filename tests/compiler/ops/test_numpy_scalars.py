"""NumPy scalars where torch takes Python numbers (CTRL scales its embeddings by `np.sqrt(d_model)`):
the jitted function gives eager's values and dtypes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import compiler


def _uses_numpy_scalars(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    y = x * np.sqrt(4.0)  # np.float64, a float subclass
    y *= np.float32(2.0)  # not a float subclass
    z = (y + np.int64(3)) * np.bool_(True)
    filled = torch.full((x.shape[-1],), np.float64(1.5), dtype=x.dtype)
    return z, filled + torch.clamp(x, min=np.float64(-0.5)), x.pow(np.int32(2))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
@pytest.mark.parametrize("shape", [(3,), (2, 5), (1,)])
def test_numpy_scalars_act_as_python_numbers(dtype: torch.dtype, shape: tuple[int, ...]) -> None:
    x = (torch.randn(shape, generator=torch.Generator().manual_seed(0)) * 4).to(dtype)
    got, want = compiler.jit(_uses_numpy_scalars)(x), _uses_numpy_scalars(x)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        torch.testing.assert_close(g, w)
