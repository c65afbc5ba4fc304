"""torch.quantile / nanquantile (compiler/ops/quantiles.py) against eager: every interpolation, scalar
and tensor q, dim None or given, keepdim, strided and one-column inputs, rows with NaN, ties for
"nearest", gradients; the argument errors."""

from __future__ import annotations

import pytest
import torch

import compiler
from tests.support.eager_match import assert_matches_eager

INTERPOLATIONS = ["linear", "lower", "higher", "midpoint", "nearest"]
Q = torch.tensor([0.0, 0.25, 0.5, 0.9, 1.0])

CASES = {
    "scalar q": lambda x, q, i: torch.quantile(x, 0.3, interpolation=i),
    "dim": lambda x, q, i: x.quantile(0.75, dim=1, interpolation=i),
    "tensor q dim keepdim": lambda x, q, i: torch.quantile(x.mT, q, dim=0, keepdim=True, interpolation=i),
    "tensor q keepdim": lambda x, q, i: torch.quantile(x, q, keepdim=True, interpolation=i),
    "0-d tensor q": lambda x, q, i: torch.quantile(x, q[2], dim=0, interpolation=i),
    "one column": lambda x, q, i: torch.quantile(x[:, :1], 0.5, dim=-1, interpolation=i),
    "ties at half ranks": lambda x, q, i: torch.quantile(x[:, :3], q[1], dim=1, interpolation=i),
    "nanquantile": lambda x, q, i: (
        torch.nanquantile(x, 0.3, interpolation=i) + x.nanquantile(q, dim=1, interpolation=i).sum()
    ),
}


def _input(seed: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.randn(4, 5, generator=torch.Generator().manual_seed(seed), dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("interpolation", INTERPOLATIONS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_quantiles_match_eager(name: str, interpolation: str, seed: int, dtype: torch.dtype) -> None:
    x = _input(seed, dtype)
    assert_matches_eager(lambda x, q: CASES[name](x, q, interpolation), x, Q.to(dtype), seed=seed, frozen=(1,))


@pytest.mark.parametrize("interpolation", INTERPOLATIONS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_rows_with_nan_match_eager(name: str, interpolation: str) -> None:
    x = _input(0, torch.float32)
    x[1, 2], x[3] = float("nan"), float("nan")
    assert_matches_eager(lambda x, q: CASES[name](x, q, interpolation), x, Q, grad=False, equal_nan=True)


def test_argument_errors_match_eager() -> None:
    with pytest.raises(RuntimeError, match="input tensor must be either float or double dtype"):
        compiler.jit(lambda x: torch.quantile(x, 0.5))(torch.arange(4))
    with pytest.raises(RuntimeError, match=r"q must be in the range \[0, 1\]"):
        compiler.jit(lambda x: torch.quantile(x, 1.5))(torch.randn(4))
    with pytest.raises(RuntimeError, match="interpolation must be one of"):
        compiler.jit(lambda x: torch.quantile(x, 0.5, interpolation="cubic"))(torch.randn(4))
