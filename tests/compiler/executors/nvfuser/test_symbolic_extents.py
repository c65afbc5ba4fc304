"""The nvFuser translation over symbolic sizes (the fake nvFuser on CPU): a slice with a constant
end of a dim whose size is symbolic, and an elementwise op whose operand's layout is read from a
tensor of symbolic and constant sizes. Comparing those sizes with `==` outside tracing evaluated the
`eq` prim, which compared them again without end (RecursionError; on a GPU the region fell back)."""

from __future__ import annotations

import warnings

import pytest
import torch

import compiler
from compiler.executors.nvfuser.executor import FALLBACK_ENV
from tests.support.nvfuser_helpers import fake_nvfuser  # noqa: F401 - a fixture


def split_heads(x: torch.Tensor) -> torch.Tensor:
    q, k = x.split(4, dim=-1)
    return q.sin() * k[..., :2].sum(-1, keepdim=True) + x[:, :1, :4]


def qkv_split_projection(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    q, k, v = (x[..., None] * w).split(w.shape[0] // 3, dim=-1)
    return (q * k).sum(-1, keepdim=True) * v


@pytest.mark.parametrize(
    ("fn", "shapes"),
    [
        (split_heads, [((2, 3, 8),), ((4, 5, 8),), ((1, 7, 8),)]),
        (qkv_split_projection, [((3, 5, 6), (6,)), ((1, 5, 3), (3,)), ((2, 5, 9), (9,))]),
    ],
    ids=["slice_end_of_a_symbolic_dim", "layout_of_symbolic_operands"],
)
def test_symbolic_sizes_translate_and_match_eager(fn, shapes, fake_nvfuser, monkeypatch) -> None:  # noqa: F811
    monkeypatch.setenv(FALLBACK_ENV, "0")  # a translation error fails the test instead of falling back
    jfn = compiler.jit(fn, executors=["nvfuser", "torch"])
    for seed, call in enumerate(shapes):  # the second call makes the entry's sizes symbolic
        generator = torch.Generator().manual_seed(seed)
        args = [torch.randn(shape, generator=generator, requires_grad=True) for shape in call]
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no region falls back to torch
            got = jfn(*args)
            got.sum().backward()
        grads = [a.grad for a in args]
        want_args = [a.detach().clone().requires_grad_() for a in args]
        want = fn(*want_args)
        want.sum().backward()
        torch.testing.assert_close(got, want)
        for g, a in zip(grads, want_args):
            torch.testing.assert_close(g, a.grad)
    assert compiler.examine.fusions(jfn), "the regions ran as nvFuser fusions"
