"""device_scalars: number inputs read from 0-d tensors compute what the numbers computed (eager's
values, for numbers of every kind and the numbers computed from them), and a number used as
anything but an elementwise operand stays a number, naming what reads it."""

from __future__ import annotations

import pytest
import torch

import compiler
from compiler.executors import TORCH
from compiler.passes.cse import cse
from compiler.passes.dce import dce
from compiler.passes.device_scalars import NumberStaysNumber, device_scalars
from compiler.passes.duplicate_widenings import duplicate_widenings
from compiler.passes.flatten import flatten
from compiler.passes.functionalize import functionalize
from compiler.passes.fuse import fuse
from compiler.prims import Prim
from compiler.tracing.check_trace import check_trace
from compiler.tracing.interpreter import eval_trace
from tests.support.nvfuser_helpers import torch_fuser

CPU = torch.device("cpu")


def _pure(fn, *args, dynamic):
    """The flattened pure computation trace of `fn` on `args`, the numbers in `dynamic` symbolic."""
    jfn = compiler.jit(fn, dynamic=dynamic, executors=["torch"])
    jfn(*args)
    return dce(cse(flatten(functionalize(compiler.last_traces(jfn)[0]))))


def _adam_like(p, g, lr, step, flag):
    bias = 1 - 0.9**step
    p = p - g * (lr / bias)
    mixed = p * (step // 3) + (step % 4) - abs(-lr) + (lr > 0.15) + (step / 3) + (-lr) // 0.04
    return p, mixed * (lr * flag)


def _scalar(value):
    return torch.tensor(value, dtype={bool: torch.bool, int: torch.int64, float: torch.float64}[type(value)])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_numbers_read_from_0d_tensors_give_eager_values_for_every_value(dtype):
    p, g = torch.randn(4, 1, 4, dtype=dtype), torch.randn(4, 1, 4, dtype=dtype)
    pure = _pure(_adam_like, p, g, 0.1, 1, True, dynamic=["lr", "step", "flag"])
    scalars = check_trace(device_scalars(pure, ["lr", "step", "flag"], CPU))
    assert [str(i.type_string()) for i in scalars.inputs[2:]] == ["cpu f64[]", "cpu i64[]", "cpu b8[]"]
    for seed, (lr, step, flag) in enumerate([(0.3, 5, True), (0.01, 11, False), (2.5, 1, True), (0.07, 40, True)]):
        torch.manual_seed(seed)
        p, g = (torch.randn(4, 1, 4, dtype=dtype).transpose(0, 2) for _ in range(2))  # non-contiguous
        got = eval_trace(scalars, p, g, _scalar(lr), _scalar(step), _scalar(flag))
        for value, expected in zip(got, _adam_like(p, g, lr, step, flag)):
            torch.testing.assert_close(value, expected)


def test_a_floor_of_a_negative_float_and_an_int_true_division_keep_pythons_kinds():
    def kinds(x, a, n):
        return x + (a // 1.0) + (n / 2) + (n // 2) + (-(a**2) > -1)

    x = torch.zeros(2)
    pure = _pure(kinds, x, -1.5, 3, dynamic=["a", "n"])
    scalars = device_scalars(pure, ["a", "n"], CPU)
    for a, n in [(-1.5, 3), (-2.25, -7), (0.5, 1)]:
        torch.testing.assert_close(eval_trace(scalars, x, _scalar(a), _scalar(n)), kinds(x, a, n))


def test_only_the_named_numbers_become_tensors_and_the_computation_keeps_its_signature():
    pure = _pure(_adam_like, torch.ones(4), torch.ones(4), 0.1, 2, True, dynamic=["lr", "step", "flag"])
    scalars = device_scalars(pure, ["lr"], CPU)
    assert [p.name for p in scalars.inputs] == [p.name for p in pure.inputs]
    assert [type(p).__name__ for p in scalars.inputs[2:]] == ["TensorProxy", "NumberProxy", "NumberProxy"]
    assert any(b.sym is Prim.BROADCAST_IN_DIM and b.args[0].shape == () for b in scalars.bsyms)
    got = eval_trace(scalars, torch.ones(4), torch.ones(4), _scalar(0.5), 2, True)
    torch.testing.assert_close(got, _adam_like(torch.ones(4), torch.ones(4), 0.5, 2, True))


@pytest.mark.parametrize(
    ("fn", "says"),
    [
        (lambda x, n: torch.full((3,), n) + x.sum(), "'n' is read by full"),
        (lambda x, n: (x * 2, n * 2), "returned as a number"),
    ],
    ids=["fill value", "returned"],
)
def test_a_number_read_other_than_as_an_elementwise_operand_stays_a_number(fn, says):
    pure = _pure(fn, torch.ones(3), 2.0, dynamic=["n"])
    with pytest.raises(NumberStaysNumber, match=says):
        device_scalars(pure, ["n"], CPU)


def _adam_over(params, grads, lr, step):
    """Adam-like updates of parameters of different shapes, their bias corrections from `step`."""
    bias1, bias2 = 1 - 0.9**step, (1 - 0.999**step) ** 0.5
    return [p - lr / bias1 * g / ((g * g).sqrt() / bias2 + 1e-8) for p, g in zip(params, grads)]


def test_updates_reading_device_scalars_stay_one_region_each() -> None:
    # the bias corrections, computed from the step read from a device scalar, were the producer every
    # update merged into: one fusion of every parameter (slow to compile for nvFuser), computing them
    # in float64 for every element; torch computes them once now, and each update is its own region,
    # as with a number step
    shapes = [(4, 3), (5,), (2, 3, 2)]
    params, grads = [torch.randn(s) for s in shapes], [torch.randn(s) for s in shapes]
    pure = _pure(_adam_over, params, grads, 0.1, 3, dynamic=["lr", "step"])
    scalars = check_trace(device_scalars(pure, ["lr", "step"], CPU))
    fused = check_trace(fuse(scalars, [torch_fuser(), TORCH]))
    regions = [b for b in fused.bsyms if getattr(b.sym, "executor", None) == "nvfuser"]
    assert sorted(tuple(r.outputs[0].shape) for r in regions) == sorted(shapes)
    assert all(
        b.sym in (Prim.POW, Prim.SUB, Prim.DIV, Prim.SQRT, Prim.NEG, Prim.MUL, Prim.CONVERT_ELEMENT_TYPE)
        for b in fused.bsyms
        if b not in regions
    )  # the bias corrections, once each, with torch
    assert all(p.shape == () or p.shape in shapes for r in regions for p in r.inputs)
    for lr, step in [(0.1, 3), (0.02, 17)]:
        got = eval_trace(fused, *params, *grads, _scalar(lr), _scalar(step))
        for value, expected in zip(got, _adam_over(params, grads, lr, step)):
            torch.testing.assert_close(value, expected)


def test_updates_reading_a_float32_0d_learning_rate_get_a_copy_of_its_scalar_math_each() -> None:
    # a learning rate given as a 0-d float32 tensor (torch.optim's capturable idiom): its scalar math
    # is cheap per element, so each update computes its own copy instead of merging with the others
    shapes = [(4, 3), (5,), (2, 3, 2)]
    params, grads = [torch.randn(s) for s in shapes], [torch.randn(s) for s in shapes]
    lr = torch.tensor(0.1)
    pure = _pure(lambda ps, gs, lr: _adam_over(ps, gs, lr * 2, 3), params, grads, lr, dynamic=[])
    fused = check_trace(fuse(duplicate_widenings(pure), [torch_fuser(), TORCH]))
    regions = [b for b in fused.bsyms if getattr(b.sym, "executor", None) == "nvfuser"]
    assert sorted(tuple(r.outputs[0].shape) for r in regions) == sorted(shapes)
    got = eval_trace(fused, *params, *grads, lr)
    for value, expected in zip(got, _adam_over(params, grads, lr * 2, 3)):
        torch.testing.assert_close(value, expected)


@pytest.mark.parametrize("count", [3, 6])
def test_the_scalar_prologue_runs_once_with_torch_whatever_the_parameter_count(count) -> None:
    # copied per update and left to torch, the bias corrections cost torch kernels per parameter
    # (two per parameter per step); computed once, their number does not grow
    shapes = [(4, 3), (5,), (2, 3, 2)] * (count // 3)
    params, grads = [torch.randn(s) for s in shapes], [torch.randn(s) for s in shapes]
    pure = _pure(_adam_over, params, grads, 0.1, 3, dynamic=["lr", "step"])
    scalars = cse(device_scalars(pure, ["lr", "step"], CPU))  # as runtime/pipeline.py runs it
    fused = check_trace(fuse(duplicate_widenings(scalars), [torch_fuser(), TORCH]))
    outside = [b for b in fused.bsyms if getattr(b.sym, "executor", None) != "nvfuser"]
    assert 0 < len(outside) <= 10 and all(b.output.shape == () for b in outside)
    assert len([b for b in fused.bsyms if b not in outside]) == count


def test_a_prologue_conversion_read_twice_is_not_copied() -> None:
    # a bool flag read from a device scalar, widened to float64 once and read by two prologue prims:
    # the widening is the prologue's too, computed once by torch, not copied per reader
    def flagged(p, g, flag):
        return p * (flag * 2.0) + g * (flag * 3.0)

    p, g = torch.randn(4, 3), torch.randn(4, 3)
    pure = _pure(flagged, p, g, True, dynamic=["flag"])
    scalars = cse(device_scalars(pure, ["flag"], CPU))
    widened = lambda t: [b for b in t.bsyms if b.sym is Prim.CONVERT_ELEMENT_TYPE and b.args[0].name == "flag"]
    assert len(widened(scalars)) == 1
    fused = check_trace(fuse(duplicate_widenings(scalars), [torch_fuser(), TORCH]))
    assert len(widened(fused)) == 1
    for flag in (True, False):
        torch.testing.assert_close(eval_trace(fused, p, g, _scalar(flag)), flagged(p, g, flag))


def _decode_step(cache, k, cos, pos):
    cache[:, :, pos : pos + 1] = k * cos[pos]  # a KV cache written at the position, a table read there
    return cache.sum(-1)


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_a_slice_write_and_read_at_a_position_number_become_an_index_copy_and_select(layout):
    def inputs(seed):
        gen = torch.Generator().manual_seed(seed)
        cache = torch.randn(2, 3, 7, 4, generator=gen)
        if layout == "transposed":
            cache = torch.randn(2, 3, 4, 7, generator=gen).transpose(-1, -2)
        return cache, torch.randn(2, 3, 1, 4, generator=gen), torch.randn(7, 4, generator=gen)

    pure = _pure(_decode_step, *inputs(0), 2, dynamic=["pos"])
    scalars = check_trace(dce(device_scalars(pure, ["pos"], CPU)))
    ops = {b.sym for b in scalars.bsyms}
    assert {Prim.INDEX_COPY, Prim.INDEX_SELECT} <= ops and not ops & {Prim.SLICE, Prim.SLICE_UPDATE}, scalars
    assert scalars.inputs[-1].type_string() == "cpu i64[]"
    for seed, pos in enumerate([0, 3, 6, 1]):  # the first, a middle and the last position
        cache, k, cos = inputs(seed)
        expected_cache = cache.clone()
        want = _decode_step(expected_cache, k, cos, pos)
        got = eval_trace(scalars, cache, k, cos, _scalar(pos))
        torch.testing.assert_close(got[0] if isinstance(got, (tuple, list)) else got, want)


@pytest.mark.parametrize(
    ("fn", "says"),
    [
        (lambda x, n: x[0:1, n : n + 1] * 2, "'n' bounds a slice of x that is not one fixed extent along one dim"),
        (lambda x, n: x[:, n:] * 2, "'n' bounds a slice of x that is not one fixed extent along one dim"),
    ],
    ids=["another dim cut", "no fixed extent"],
)
def test_a_slice_at_a_position_number_that_index_select_cannot_take_stays_a_number(fn, says):
    pure = _pure(fn, torch.ones(3, 5), 2, dynamic=["n"])
    with pytest.raises(NumberStaysNumber, match=says):
        device_scalars(pure, ["n"], CPU)
