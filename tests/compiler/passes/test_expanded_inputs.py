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


def _lifted_programs():
    def exp_scale(x, w, lr):
        x.mul_(w.exp())  # w.exp() is computed, then broadcast

    def lr_math(x, w, lr):
        x.add_(w * (lr * -2 + 1))  # a 0-d learning rate's math, then broadcast

    def shared(x, w, lr):
        x.mul_(w.sigmoid())
        return w.sigmoid() * 3  # the computed value is read at its own shape too

    return [exp_scale, lr_math, shared]


@pytest.mark.parametrize("runner", ["torch", "nvfuser"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_broadcast_of_a_computed_value_is_made_of_the_inputs_broadcasts(runner, dtype, fake_nvfuser):  # noqa: F811
    for fn in _lifted_programs():
        for seed, (x_shape, w_shape) in enumerate([((4, 6), (6,)), ((3, 1, 6), (1, 6)), ((5, 6), (1,))]):
            torch.manual_seed(seed)
            x, w, lr = (
                torch.randn(x_shape, dtype=dtype),
                torch.randn(w_shape, dtype=dtype),
                torch.randn((), dtype=dtype),
            )
            jfn = _jit(fn, runner)
            got, expected = x.clone(), x.clone()
            out = jfn(got, w, lr)
            want = fn(expected, w, lr)
            # a fusion keeps bf16 intermediates in float32: within a bf16 rounding of eager's
            close = {"atol": 4e-3, "rtol": 1.6e-2} if dtype == torch.bfloat16 else {}
            torch.testing.assert_close(got, expected, **close)
            torch.testing.assert_close(out, want, **close)
            regions = region_fusions(compiler.last_traces(jfn)[-1])
            writing = [f for f in regions if f.region.written]
            assert writing and all(b.sym is not Prim.BROADCAST_IN_DIM for f in writing for b in f.region.bsyms), [
                str(f.region.bsyms) for f in writing
            ]


@pytest.mark.parametrize("runner", ["torch", "nvfuser"])
def test_a_computed_value_read_twice_is_one_broadcast_and_one_input(runner, fake_nvfuser):  # noqa: F811
    # two copies of one broadcast would be two fusion inputs, splitting it into unjoined parts
    def shared(x, y, w):
        s = w.exp() * 2
        x.mul_(s)
        return s + y

    for seed in range(2):
        torch.manual_seed(seed)
        x, y, w = torch.randn(4, 6), torch.randn(4, 6), torch.randn(6)
        jfn = _jit(shared, runner)
        got, expected = x.clone(), x.clone()
        out = jfn(got, y, w)
        torch.testing.assert_close(out, shared(expected, y, w))
        torch.testing.assert_close(got, expected)
        trace = compiler.last_traces(jfn)[-1]
        made = [b for b in trace.bsyms if b.sym is Prim.BROADCAST_IN_DIM]
        (fusion,) = region_fusions(trace)
        assert len(made) == 1 and sum(p.name == made[0].output.name for p in fusion.region.inputs) == 1, str(trace)
        assert len([b for b in fusion.region.bsyms if b.sym is Prim.EXP]) == 1, str(trace)
