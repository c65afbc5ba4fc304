"""torch.histc (a mixture of experts' tokens per expert): with few bins each count is a sum of
comparisons (no scatter: it fuses with the binning), with many an index_add of ones; both count as
eager does, values outside [min, max] in no bin."""

from __future__ import annotations

import pytest
import torch

import compiler
from compiler.ops.experts import _COMPARED_BINS


def _histc(bins: int, low: float, high: float):
    return lambda x: torch.histc(x, bins=bins, min=low, max=high)


def _prims(jitted) -> str:
    return str(compiler.last_traces(jitted)[-1])


# NOTE: bf16 only where every count is below 256: above, eager's bf16 accumulation stops counting
# (256 + 1 rounds to 256), where these counts are exact until the final conversion
SIZES = [(1, 1), (12, 4), (4096 * 2, 8), (_COMPARED_BINS // 64 + 1, 64)]  # the last by index_add
CASES = [(dtype, count, bins) for dtype in (torch.float32, torch.float64) for count, bins in SIZES]
CASES += [(torch.bfloat16, 1, 1), (torch.bfloat16, 300, 8)]


@pytest.mark.parametrize(("dtype", "count", "bins"), CASES)
def test_counts_match_eager_by_comparisons_or_by_index_add(dtype: torch.dtype, count: int, bins: int) -> None:
    fn = _histc(bins, -1.0, 2.5)
    jitted = compiler.jit(fn)
    for seed in range(3):
        gen = torch.Generator().manual_seed(seed)
        x = (torch.rand(count, generator=gen, dtype=torch.float64) * 5 - 2).to(dtype)  # some outside the range
        x[: min(count, 2)] = torch.tensor([2.5, -1.0][: min(count, 2)], dtype=dtype)  # the bounds themselves
        torch.testing.assert_close(jitted(x), fn(x), rtol=0, atol=0)
    compared = count * bins <= _COMPARED_BINS
    assert ("index_add" not in _prims(jitted)) is compared, _prims(jitted)


def test_integer_expert_ids_count_exactly_in_their_dtype() -> None:
    # as transformers' grouped experts count tokens on CUDA (int32 ids); torch's CPU histc takes floats
    def counts(ids: torch.Tensor) -> torch.Tensor:
        return torch.histc(ids, bins=8, min=0, max=7)

    jitted = compiler.jit(counts)
    for seed in range(3):
        ids = torch.randint(0, 9, (2, 4096), generator=torch.Generator().manual_seed(seed), dtype=torch.int32)
        got = jitted(ids)
        want = torch.histc(ids.float(), bins=8, min=0, max=7).to(torch.int32)
        assert got.dtype == torch.int32 and torch.equal(got, want), (got, want)
