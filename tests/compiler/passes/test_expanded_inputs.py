"""expanded_inputs: a region writing back into its inputs reads the broadcasts of its other inputs
already expanded (nvFuser otherwise copies the written value through a second kernel); values
against eager, and the broadcasts that must stay inside."""

from __future__ import annotations

import pytest
import torch

import compiler
from compiler.executors.nvfuser.executor import region_fusions
from compiler.prims import Prim
from tests.support.nvfuser_helpers import fake_nvfuser  # noqa: F401 - a fixture


def _jit(fn, runner: str):
    return compiler.jit(fn, executors=["nvfuser", "torch"], fusion={"runner": runner})


def _broadcasts_inside(jfn) -> list[str]:
    return [
        b.args[0].name for f in region_fusions(compiler.last_traces(jfn)[-1]) for b in f.region.bsyms
        if b.sym is Prim.BROADCAST_IN_DIM
    ]  # fmt: skip


def _scale_in_place(x, w, s):
    x.mul_(w).add_(s)  # w: a vector broadcast over rows; s: a 0-d tensor


@pytest.mark.parametrize("runner", ["torch", "nvfuser"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_written_region_reads_its_input_broadcasts_expanded_and_agrees_with_eager(runner, seed, fake_nvfuser):  # noqa: F811
    torch.manual_seed(seed)
    shapes = [((5, 4), (4,)), ((3, 1, 6), (1, 6)), ((1, 4), (4,)), ((6, 4), (1,))]
    for x_shape, w_shape in shapes:
        x, w, s = torch.randn(x_shape), torch.randn(w_shape), torch.randn(())
        jfn = _jit(_scale_in_place, runner)
        got, expected = x.clone(), x.clone()
        jfn(got, w, s)
        _scale_in_place(expected, w, s)
        torch.testing.assert_close(got, expected)
        assert _broadcasts_inside(jfn) == []
        outside = [b for b in compiler.last_traces(jfn)[-1].bsyms if b.sym is Prim.BROADCAST_IN_DIM]
        assert {b.args[0].name for b in outside} >= {"s"}


@pytest.mark.parametrize("runner", ["torch", "nvfuser"])
def test_non_contiguous_inputs_and_a_second_call_agree_with_eager(runner, fake_nvfuser):  # noqa: F811
    jfn = _jit(_scale_in_place, runner)
    for seed in range(2):
        torch.manual_seed(seed)
        x, w, s = torch.randn(4, 6).t(), torch.randn(8)[::2], torch.randn(())
        got, expected = x.clone().t().contiguous().t(), x.clone()
        jfn(got, w, s)
        _scale_in_place(expected, w, s)
        torch.testing.assert_close(got, expected)


def test_regions_that_write_nothing_keep_their_broadcasts(fake_nvfuser):  # noqa: F811
    jfn = _jit(lambda x, w: x * w + 1, "nvfuser")
    jfn(torch.randn(5, 4), torch.randn(4))
    assert _broadcasts_inside(jfn) == ["w"]


def test_a_broadcast_of_a_written_input_or_read_by_a_reduction_stays_inside(fake_nvfuser):  # noqa: F811
    def reduced(x, v):
        x.add_(v.expand(2, 4).sum(0))  # the broadcast of v is read by a sum

    def written(y, x):
        y.add_(x)  # x broadcast over y's rows, and written too
        x.mul_(2)

    for fn, shapes, kept in [(reduced, [(3, 4), (4,)], "v"), (written, [(3, 4), (4,)], "x")]:
        for seed in range(2):
            torch.manual_seed(seed)
            args = [torch.randn(s) for s in shapes]
            jfn = _jit(fn, "nvfuser")
            got, expected = [a.clone() for a in args], [a.clone() for a in args]
            jfn(*got)
            fn(*expected)
            torch.testing.assert_close(got, expected)
            assert kept in _broadcasts_inside(jfn)
