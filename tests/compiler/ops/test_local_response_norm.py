"""F.local_response_norm (compiler/ops/local_response_norm.py) against eager: 3-d, 4-d and 5-d
inputs, window sizes from 1 past the channel count, float32 and bfloat16, gradients; nn.LocalResponseNorm."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import compiler
from tests.support.eager_match import assert_matches_eager


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("shape", [(2, 5, 4), (2, 6, 3, 3), (1, 4, 2, 2, 2)])
@pytest.mark.parametrize("size", [1, 2, 3, 7])
def test_local_response_norm_matches_eager(size: int, shape: tuple, seed: int, dtype: torch.dtype) -> None:
    x = torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)
    bf16 = {"reference": torch.float32} if dtype == torch.bfloat16 else {}
    assert_matches_eager(lambda x: F.local_response_norm(x, size, 1e-2, 0.6, 2.0), x, seed=seed, **bf16)
    assert_matches_eager(lambda x: F.local_response_norm(x.transpose(0, -1), size), x, seed=seed, **bf16)


def test_module_and_errors() -> None:
    module, x = torch.nn.LocalResponseNorm(3), torch.randn(2, 5, 4)
    torch.testing.assert_close(compiler.jit(module)(x), module(x))
    with pytest.raises(ValueError, match="Expected 3D or higher dimensionality input"):
        compiler.jit(lambda x: F.local_response_norm(x, 2))(torch.randn(3, 4))
