"""Ops whose work degenerates to nothing still return new memory where eager does: a scan over a
size-1 dim, a pad of zero widths, a pad that only crops. Writing into the result must never
write into the caller's tensor."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import compiler

DEGENERATE = {
    "logcumsumexp_size_one": (lambda t: t.logcumsumexp(1), (4, 1)),
    "cummax_size_one": (lambda t: t.cummax(1)[0], (4, 1)),
    "pad_nothing": (lambda t: F.pad(t, (0, 0)), (3, 4)),
    "pad_crop_only": (lambda t: F.pad(t, (-1, 0, 0, -1)), (3, 4)),
}


@pytest.mark.parametrize("name", DEGENERATE, ids=str)
def test_the_result_is_new_memory_as_eager_s(name: str) -> None:
    fn, shape = DEGENERATE[name]
    x = torch.randn(shape)
    before = x.clone()
    got = compiler.jit(fn)(x)
    torch.testing.assert_close(got, fn(x))
    assert got.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    got.add_(1)
    torch.testing.assert_close(x, before)
