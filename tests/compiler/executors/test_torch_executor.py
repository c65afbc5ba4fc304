"""The torch executor's prims against eager where torch's defaults differ from the prims' rules."""

from __future__ import annotations

import pytest
import torch

import compiler


@pytest.mark.parametrize("executors", [["torch"], None])
def test_integer_sums_and_products_keep_the_dtype_asked_for_and_wrap_as_eager(executors) -> None:
    def fn(a: torch.Tensor) -> tuple:
        small = a.to(torch.int8)
        return (
            a.sum(-1, dtype=torch.int32),  # wraps around in int32, as eager
            torch.sum(a, dtype=torch.int32),
            small.sum(0, dtype=torch.int16),
            small.prod(-1, dtype=torch.int16),
            (a > 0).sum(-1),  # bools count in int64
        )

    a = torch.randint(2**29, 2**30, (3, 8), dtype=torch.int32)
    a[:, ::3] = torch.randint(-5, 5, (3, 3), dtype=torch.int32)
    got, want = compiler.jit(fn, executors=executors)(a), fn(a)
    assert [g.dtype for g in got] == [w.dtype for w in want]
    for g, w in zip(got, want):
        assert torch.equal(g, w)
