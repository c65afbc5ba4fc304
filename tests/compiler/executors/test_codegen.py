"""Codegen: implementations with a source form (a slice as narrows) run inline, with eager's views."""

from __future__ import annotations

import random

import pytest
import torch

import compiler


def split_heads(x):
    q, k, v = x.split(x.shape[-1] // 3, dim=-1)
    return q * 2, k, v


def computation_source(jfn) -> str:
    return jfn.last_entry.computation.__fusebench_source__


def assert_same_views(out, ref):
    for a, b in zip(out, ref):
        assert torch.equal(a, b)
        assert (a.shape, a.stride(), a.storage_offset()) == (b.shape, b.stride(), b.storage_offset())


def test_a_split_runs_as_one_narrow_per_piece_and_gives_eagers_views():
    x = torch.randn(8, 1, 12)
    jfn = compiler.jit(split_heads)
    assert_same_views(jfn(x), split_heads(x))
    source = computation_source(jfn)
    assert source.count(".narrow(2, ") == 3, source
    assert "_slice" not in source, source


def test_strided_slices_keep_the_call():
    def every_other(x):
        return x[:, ::2] + 1

    x = torch.randn(3, 7)
    jfn = compiler.jit(every_other)
    torch.testing.assert_close(jfn(x), every_other(x))
    assert "_slice" in computation_source(jfn)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_slices_with_symbolic_bounds_match_eager_views(seed):
    def cut(x, a, b, c):
        return x[a:, :b, c : x.shape[-1]]

    rng = random.Random(seed)
    jfn = compiler.jit(cut, numbers="symbolic")
    for _ in range(6):
        shape = [rng.randint(1, 6) for _ in range(3)]
        x = torch.randn(*shape).transpose(0, 2)  # not contiguous
        a, b, c = (rng.randint(0, s) for s in x.shape)
        assert_same_views([jfn(x, a, b, c)], [cut(x, a, b, c)])
