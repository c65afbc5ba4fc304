"""torch.searchsorted and torch.bucketize (compiler/ops/bucketing.py) against eager: left and right
(right= and side=), out_int32, sorter, 1-D and batched boundaries, scalar values, NaN values, ties,
strided values, float32, bfloat16 and int64."""

from __future__ import annotations

import pytest
import torch

import compiler
from tests.support.eager_match import assert_matches_eager

NAN = float("nan")

CASES = {
    "left": lambda b, v: torch.searchsorted(b, v),
    "right": lambda b, v: torch.searchsorted(b, v, right=True),
    "side int32": lambda b, v: torch.searchsorted(b, v, side="right", out_int32=True),
    "batched": lambda b, v: torch.searchsorted(torch.stack([b, b * 2]), v),
    "sorter": lambda b, v: torch.searchsorted(b.flip(0), v, sorter=b.flip(0).argsort(stable=True)),
    "scalar": lambda b, v: torch.searchsorted(b, 3) + torch.bucketize(2, b, right=True),
    "bucketize": lambda b, v: torch.bucketize(v, b),
    "bucketize right strided": lambda b, v: torch.bucketize(v.mT, b, right=True, out_int32=True),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
@pytest.mark.parametrize("name", sorted(CASES))
def test_insertion_points_match_eager(name: str, dtype: torch.dtype) -> None:
    boundaries = torch.tensor([1.0, 2.0, 2.0, 4.0, 7.0]).to(dtype)
    values = torch.tensor([[0.0, 2.0, 2.5, 7.0, 9.0, NAN], [1.0, 4.0, 3.0, -1.0, 7.0, 8.0]])
    values = values.nan_to_num(5.0).to(dtype) if dtype == torch.int64 else values.to(dtype)
    assert_matches_eager(CASES[name], boundaries, values, grad=False)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_values_match_eager(seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    boundaries, values = torch.randn(7, generator=g).sort().values, torch.randn(3, 4, generator=g)
    assert_matches_eager(lambda b, v: (torch.bucketize(v, b), torch.searchsorted(b, v, right=True)), boundaries, values)


def test_errors_match_eager() -> None:
    with pytest.raises(RuntimeError, match="side and right can't be set to opposites"):
        compiler.jit(lambda b, v: torch.searchsorted(b, v, right=True, side="left"))(torch.arange(3.0), torch.ones(2))
    with pytest.raises(RuntimeError, match="boundaries tensor must be 1 dimension"):
        compiler.jit(torch.bucketize)(torch.ones(2), torch.ones(2, 2))
