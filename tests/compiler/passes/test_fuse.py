"""The fusion pass: which regions form, that they never create a cycle, and the knobs."""

from __future__ import annotations

import random

import pytest
import torch

import compiler
from compiler import prims
from compiler.core.executor import FusionOptions, Reason
from compiler.executors import TORCH
from compiler.passes.fuse import fuse, partition
from compiler.prims import Prim
from compiler.tracing.check_trace import check_trace
from compiler.tracing.check_writebacks import check_writebacks
from compiler.tracing.interpreter import eval_trace
from tests.support.nvfuser_helpers import outside, prim_trace, region_ops, torch_fuser

F32 = ((4, 8), torch.float32)


def fused(trace, **options):
    executors = [torch_fuser(**options), TORCH]
    return check_trace(fuse(trace, executors)), partition(trace, executors)


def reasons(part):
    return {d.bsym.sym: d.reason for d in part.decisions}


def test_a_chain_becomes_one_region_printed_with_its_prims():
    trace = prim_trace(lambda a, b: prims.sin(prims.add(prims.mul(a, 2.0), b)), F32, F32)
    result, _ = fused(trace)
    assert region_ops(result) == [["mul", "add", "sin"]]
    lines = str(result).splitlines()
    assert lines[0].startswith("# Constructed by fuse")
    assert lines[7:11] == [
        "  t2, = nvFusion0(a0, a1)  # t2: cpu f32[4, 8]",
        "    # t0 = prims.mul(a0, 2.0)  # t0: cpu f32[4, 8]",
        "    # t1 = prims.add(t0, a1)  # t1: cpu f32[4, 8]",
        "    # t2 = prims.sin(t1)  # t2: cpu f32[4, 8]",
    ]


def test_fusing_never_creates_a_cycle_through_an_unfused_op():
    # x -> floor_divide (torch) -> z, and x -> z directly: x and z in one region would need the
    # floor_divide both before and after that region.
    def program(a):
        x = prims.exp(a)
        y = prims.floor_divide(x, 3.0)
        return prims.add(x, y)

    prims_trace = prim_trace(program, F32)
    result, part = fused(prims_trace, min_region_size=1)
    assert region_ops(result) == [["exp"], ["add"]]
    assert outside(result) == ["floor_divide"]
    x = torch.randn(4, 8)
    torch.testing.assert_close(eval_trace(result, x), eval_trace(prims_trace, x))
    _, part = fused(prims_trace)
    assert reasons(part)[Prim.EXP] is Reason.CYCLE
    assert "floor_divide" in next(d.detail for d in part.decisions if d.bsym.sym is Prim.EXP)


@pytest.mark.parametrize("seed", range(25))
def test_random_programs_stay_acyclic_and_compute_the_same(seed):
    rng = random.Random(seed)
    ops = [prims.sin, prims.exp, prims.neg, prims.tanh]

    def program(a, b):
        values = [a, b]
        for _ in range(14):
            x, y = rng.choice(values), rng.choice(values)
            kind = rng.random()
            if kind < 0.25:
                values.append(prims.floor_divide(x, 2.0))  # torch-only: forces splits
            elif kind < 0.6:
                values.append(rng.choice(ops)(x))
            else:
                values.append(prims.add(x, y))
        return tuple(values[-4:])

    trace = prim_trace(program, F32, F32)
    for options in ({}, {"min_region_size": 1}, {"horizontal": False, "min_region_size": 1}):
        result, _ = fused(trace, **options)
        a, b = torch.randn(4, 8), torch.randn(4, 8)
        for got, want in zip(eval_trace(result, a, b), eval_trace(trace, a, b)):
            torch.testing.assert_close(got, want, equal_nan=True)


def test_horizontal_merging_joins_independent_regions_sharing_an_input():
    def program(a, b):
        return prims.sin(prims.mul(a, 2.0)), prims.exp(prims.add(a, 1.0))

    result, _ = fused(prim_trace(program, F32, F32))
    assert region_ops(result) == [["mul", "sin", "add", "exp"]]
    result, _ = fused(prim_trace(program, F32, F32), horizontal=False)
    assert region_ops(result) == [["mul", "sin"], ["add", "exp"]]


def test_horizontal_merging_leaves_large_unrelated_regions_apart():
    def chain(x):
        for _ in range(6):
            x = prims.sin(x)
        return x

    result, _ = fused(prim_trace(lambda a, b: (chain(a), chain(b)), ((4, 8), torch.float32), ((5, 8), torch.float32)))
    assert len(region_ops(result)) == 2
    result, _ = fused(prim_trace(lambda a, b: (chain(a), chain(b)), F32, F32))
    assert len(region_ops(result)) == 2  # same shape alone: nvFuser would segment them apart anyway
    result, _ = fused(prim_trace(lambda a, b: (chain(a), chain(b)), F32, F32), merge_same_shape=True)
    assert len(region_ops(result)) == 1


def test_a_region_of_shape_ops_only_is_left_to_torch():
    def program(a):
        return prims.reshape(prims.permute(a, [1, 0]), [32])

    result, part = fused(prim_trace(program, F32), min_region_size=1)
    assert region_ops(result) == []
    assert set(reasons(part).values()) == {Reason.SHAPE_ONLY}


def test_a_cat_counts_as_a_kernel_toward_the_region_size():
    # A fused QKV projection's backward: the three heads' gradients laid back out, joined and
    # summed for the bias. In torch the cat is a kernel (and so is the sum): fused, they are one.
    def program(q, k, v):
        parts = [prims.reshape(prims.permute(g, [1, 0, 2]), [4, 6]) for g in (q, k, v)]
        joined = prims.cat(parts, 1)
        return joined, prims.sum(joined, (0,))

    heads = ((2, 4, 3), torch.float32)
    trace = prim_trace(program, heads, heads, heads)
    result, _ = fused(trace)
    assert [sorted(set(ops)) for ops in region_ops(result)] == [["cat", "permute", "reshape", "sum"]]
    args = [torch.randn(2, 4, 3) for _ in range(3)]
    for got, want in zip(eval_trace(result, *args), eval_trace(trace, *args)):
        torch.testing.assert_close(got, want)
    alone, part = fused(prim_trace(lambda a, b: prims.cat([a, b], 0), F32, F32))
    assert region_ops(alone) == [] and reasons(part)[Prim.CAT] is Reason.SHAPE_ONLY


def test_views_only_the_outputs_need_are_left_to_torch():
    # A permute (and a reshape) of a fused value that only a matmul reads: in the region each
    # would be one more tensor written; as torch they are views of the region's output.
    def program(a, w):
        h = prims.sin(prims.mul(a, 2.0))
        return prims.matmul(prims.permute(h, [1, 0]), w), prims.reshape(h, [32])

    trace = prim_trace(program, F32, ((4, 3), torch.float32))
    result, part = fused(trace)
    assert region_ops(result) == [["mul", "sin"]]
    assert reasons(part)[Prim.PERMUTE] is Reason.LEFT_TO_TORCH and reasons(part)[Prim.RESHAPE] is Reason.LEFT_TO_TORCH
    args = (torch.randn(4, 8), torch.randn(4, 3))
    for got, want in zip(eval_trace(result, *args), eval_trace(trace, *args)):
        torch.testing.assert_close(got, want)


def test_views_that_would_write_more_or_copy_stay_in_the_region():
    # A slice of a value the region does not otherwise return (returning all of it would write
    # more), and, in a region that resizes nothing, a reshape of a permute (as torch, a copy of its own).
    def sliced(a):
        return prims.slice(prims.sin(prims.mul(a, 2.0)), [0, 0], [2, 8], [1, 1])

    def copied(a):
        return prims.sin(prims.mul(a, 2.0)), prims.reshape(prims.permute(prims.cos(a), [1, 0]), [32])

    assert region_ops(fused(prim_trace(sliced, F32))[0]) == [["mul", "sin", "slice"]]
    assert sorted(map(sorted, region_ops(fused(prim_trace(copied, F32))[0]))) == [
        ["cos", "mul", "permute", "reshape", "sin"]
    ]


def test_a_reshape_of_a_permute_of_a_region_input_is_left_to_torch():
    # attention's value gradient laid out for its weight's matmul, in the fusion of the rotary
    # backward: the region would only copy it (nvFuser in a segment of its own); torch copies it
    # or, for a tensor already in that order, makes a view
    def program(a, g):
        return prims.sin(prims.mul(a, 2.0)), prims.reshape(prims.permute(g, [1, 0, 2]), [4, 6])

    trace = prim_trace(program, F32, ((2, 4, 3), torch.float32))
    result, part = fused(trace)
    assert region_ops(result) == [["mul", "sin"]]
    assert outside(result) == ["permute", "reshape"]
    assert reasons(part)[Prim.RESHAPE] is Reason.LEFT_TO_TORCH
    args = (torch.randn(4, 8), torch.randn(2, 4, 3))
    for got, want in zip(eval_trace(result, *args), eval_trace(trace, *args)):
        torch.testing.assert_close(got, want)


def test_a_reshape_of_a_permute_a_resizing_region_computes_is_left_to_torch():
    # a rotary backward (two slices and a cat) whose result a matmul reads laid out [s, h * d]:
    # nvFuser would copy it in a segment of its own, with no kernel, at a fusion's host cost
    def program(g, cos):
        first, second = prims.slice(g, [0, 0, 0], [2, 4, 2], [1, 1, 1]), prims.slice(g, [0, 0, 2], [2, 4, 4], [1, 1, 1])
        rotated = prims.add(prims.mul(g, cos), prims.cat([second, prims.neg(first)], 2))
        return prims.reshape(prims.permute(rotated, [1, 0, 2]), [4, 8])

    shape = ((2, 4, 4), torch.float32)
    trace = prim_trace(program, shape, shape)
    result, part = fused(trace)
    assert outside(result) == ["permute", "reshape"]
    assert [d.reason for d in part.decisions if d.bsym.sym is Prim.RESHAPE] == [Reason.LEFT_TO_TORCH]
    args = (torch.randn(2, 4, 4), torch.randn(2, 4, 4))
    torch.testing.assert_close(eval_trace(result, *args), eval_trace(trace, *args))


def test_small_resizes_stay_in_a_region_that_keeps_a_large_one():
    # a decode step: the new token's key rotated (two slices, a cat: small against the region) and
    # appended to the cache (a large cat). The cache's cat keeps nvFuser's resize scheduling, so
    # taking the rotation out would only cost torch launches (a causal LM's label shift, the only
    # resize of its loss fusion, does leave: tests/compiler/passes/autodiff/test_cross_entropy.py)
    def program(k, cos, cache):
        first = prims.slice(k, [0, 0, 0, 0], [2, 4, 1, 4], [1] * 4)
        second = prims.slice(k, [0, 0, 0, 4], [2, 4, 1, 8], [1] * 4)
        rotated = prims.add(prims.mul(k, cos), prims.cat([prims.neg(second), first], 3))
        return prims.cat([cache, rotated], 2)

    token = ((2, 4, 1, 8), torch.float32)
    trace = prim_trace(program, token, token, ((2, 4, 64, 8), torch.float32))
    result, _ = fused(trace)
    assert outside(result) == []
    assert sorted(region_ops(result)[0]) == ["add", "cat", "cat", "mul", "neg", "slice", "slice"]
    args = (torch.randn(2, 4, 1, 8), torch.randn(2, 4, 1, 8), torch.randn(2, 4, 64, 8))
    torch.testing.assert_close(eval_trace(result, *args), eval_trace(trace, *args))


def test_reshapes_of_region_inputs_are_left_to_torch():
    # GPT-2's loss reads [b, s, vocab] logits (a matmul's output) as [b * s, vocab], and [b, s]
    # targets as [b * s]: as torch both are views, in the region nvFuser adds kernels for them.
    def program(x, w, targets):
        logits = prims.reshape(prims.linear(x, w, None), [8, 6])
        picked = prims.take_along_dim(logits, prims.reshape(targets, [8, 1]), 1)
        return prims.sub(prims.amax(logits, (1,)), prims.squeeze(picked, [1]))

    trace = prim_trace(program, ((2, 4, 3), torch.float32), ((6, 3), torch.float32), ((2, 4), torch.int64))
    result, part = fused(trace)
    assert outside(result) == ["linear", "reshape", "reshape"]
    assert [d.reason for d in part.decisions if d.bsym.sym is Prim.RESHAPE] == [Reason.LEFT_TO_TORCH] * 2
    args = (torch.randn(2, 4, 3), torch.randn(6, 3), torch.randint(0, 6, (2, 4)))
    torch.testing.assert_close(eval_trace(result, *args), eval_trace(trace, *args))


def test_a_slice_of_a_region_input_that_the_region_also_returns_is_left_to_torch():
    # GPT-J's rotary half `k[..., :4]`: used in the region, and sliced again with a step by torch.
    # In the region it would be returned as an alias of its input (a segment that launches nothing).
    def program(k, sin, returned=True):
        half = prims.slice(k, [0, 0], [4, 4], [1, 1])
        rotated = prims.add(prims.mul(prims.exp(half), sin), 1.0)
        return (rotated, prims.slice(half, [0, 0], [4, 4], [1, 2])) if returned else rotated

    trace = prim_trace(program, F32, ((4, 4), torch.float32))
    result, part = fused(trace)
    assert region_ops(result) == [["exp", "mul", "add"]] and outside(result) == ["slice", "slice"]
    slices = [d.reason for d in part.decisions if d.bsym.sym is Prim.SLICE]
    assert slices == [Reason.LEFT_TO_TORCH, Reason.NO_TRANSLATION]  # nvFuser slices with step 1 only
    args = (torch.randn(4, 8), torch.randn(4, 4))
    for got, want in zip(eval_trace(result, *args), eval_trace(trace, *args)):
        torch.testing.assert_close(got, want)
    # read inside only, the slice stays: the region reading the whole input reads no more
    inside_only = prim_trace(lambda k, sin: program(k, sin, returned=False), F32, ((4, 4), torch.float32))
    assert region_ops(fused(inside_only)[0]) == [["slice", "exp", "mul", "add"]]


def test_a_reshape_of_a_value_the_region_computes_stays():
    def program(a):
        return prims.amax(prims.reshape(prims.exp(a), [2, 16]), (1,))

    result, part = fused(prim_trace(program, F32))
    assert region_ops(result) == [["exp", "reshape", "amax"]] and Prim.RESHAPE not in reasons(part)


def test_a_view_of_a_buffer_written_back_stays_in_the_region():
    def program(a):
        view = prims.reshape(a, [32])
        h = prims.sin(prims.mul(a, 2.0))
        prims.copy_to(h, a)
        return view

    _, part = fused(prim_trace(program, F32))
    assert Prim.RESHAPE not in reasons(part)


def test_min_region_size_controls_single_op_fusions():
    trace = prim_trace(lambda a: prims.sin(a), F32)
    result, part = fused(trace)
    assert region_ops(result) == [] and reasons(part)[Prim.SIN] is Reason.TOO_SMALL
    result, _ = fused(trace, min_region_size=1)
    assert region_ops(result) == [["sin"]]


def test_matmul_goes_to_torch_unless_asked():
    def program(a, w):
        return prims.add(prims.matmul(prims.mul(a, 2.0), w), 1.0)

    trace = prim_trace(program, ((4, 8), torch.float32), ((8, 8), torch.float32))
    result, part = fused(trace, min_region_size=1)
    assert outside(result) == ["matmul"] and region_ops(result) == [["mul"], ["add"]]
    assert reasons(part)[Prim.MATMUL] is Reason.LEFT_TO_TORCH
    result, _ = fused(trace, matmul=True)
    assert region_ops(result) == [["mul", "matmul", "add"]]


def test_attention_is_left_to_the_sdpa_executor():
    def program(q):
        return prims.mul(torch.nn.functional.scaled_dot_product_attention(q.sin(), q, q), 2.0)

    jfn = compiler.jit(program, executors=["nvfuser", "sdpa"], fusion={"runner": "torch", "min_region_size": 1})
    q = torch.randn(1, 2, 4, 8)
    torch.testing.assert_close(jfn(q), program(q))
    assert outside(compiler.last_traces(jfn)[-1]) == ["sdpa"]
    why = compiler.examine.why_not_fused(jfn)
    assert [d.reason for d in why] == [Reason.LEFT_TO_TORCH] and "sdpa executor" in why[0].detail


def test_an_executor_listed_first_claims_its_prims():
    class Claims:
        name = "claims_sin"

        def implementation(self, bsym):
            return torch.sin if bsym.sym is Prim.SIN else None

    fuser = torch_fuser(min_region_size=1)
    trace = prim_trace(lambda a: prims.exp(prims.sin(a)), F32)
    part = partition(trace, [Claims(), fuser, TORCH])
    assert reasons(part) == {Prim.SIN: Reason.CLAIMED}
    assert len(partition(trace, [fuser, Claims(), TORCH]).regions) == 1


def test_fuel_stops_fusing_after_n_regions(monkeypatch):
    def program(a):
        x = prims.sin(prims.exp(a))
        y = prims.floor_divide(x, 2.0)
        return prims.cos(prims.neg(y))

    trace = prim_trace(program, F32)
    assert len(fused(trace)[0].bsyms) == 3
    result, part = fused(trace, fuel=1)
    assert region_ops(result) == [["exp", "sin"]]
    assert reasons(part)[Prim.COS] is Reason.FUEL
    monkeypatch.setenv("FUSEBENCH_FUSION_FUEL", "0")
    assert FusionOptions.from_any(None).fuel == 0


def test_write_back_waits_for_every_earlier_reader_of_its_buffer():
    def program(x, y):
        updated = prims.add(prims.mul(x, 2.0), y)
        early = prims.floor_divide(x, 3.0)  # torch reads x's old value
        prims.copy_to(updated, x)
        return early

    trace = prim_trace(program, F32, F32)
    result, _ = fused(trace)
    order = [b.sym.value if isinstance(b.sym, Prim) else "region" for b in result.bsyms]
    assert order == ["floor_divide", "region"]
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    x_eager, x_fused = x.clone(), x.clone()
    torch.testing.assert_close(eval_trace(result, x_fused, y), eval_trace(trace, x_eager, y))
    torch.testing.assert_close(x_fused, x_eager)


def test_write_back_waits_for_every_earlier_reader_of_a_view_of_its_buffer():
    # Found by GPU fuzzing: the region took `copy_to(.., y)` along with the slice of y, which torch's
    # slice_update read only after it (as a view of y it would have seen y's new value).
    def program(x, y):
        view = prims.slice(y, [1], [3], [1])
        negated = prims.neg(view)
        prims.copy_to(prims.slice_update(x, view, [1], [3], [1]), x)
        prims.copy_to(prims.add(y, prims.broadcast_in_dim(prims.slice(negated, [1], [2], [1]), [3], [0])), y)
        return negated

    trace = prim_trace(program, ((3,), torch.float32), ((3,), torch.float32))
    for size in (1, 2):
        result, _ = fused(trace, min_region_size=size)
        check_writebacks(result)
        x, y = torch.randn(3), torch.randn(3)
        eager, fused_args = (x.clone(), y.clone()), (x.clone(), y.clone())
        torch.testing.assert_close(eval_trace(result, *fused_args), eval_trace(trace, *eager))
        torch.testing.assert_close(fused_args, eager)


def test_a_region_never_writes_back_a_buffer_it_computes():
    def program(x):
        t = prims.exp(x)
        prims.copy_to(prims.sin(x), t)
        return t

    result, _ = fused(prim_trace(program, F32), min_region_size=1)
    for ops in region_ops(result):
        assert not ({"exp", "copy_to"} <= set(ops))


def test_symbolic_scalars_stay_on_the_host_and_feed_the_region():
    jfn = compiler.jit(
        lambda a, d0, d1: tuple(t * 2 for t in torch.split(a, (d0, d1, a.size(2) - d0 - d1), dim=2)),
        numbers="symbolic",
        executors=["nvfuser"],
        fusion={"runner": "torch"},
    )
    a = torch.randn(2, 3, 16)
    for d0 in (1, 5):
        for got, want in zip(jfn(a, d0, 4), torch.split(a * 2, (d0, 4, 12 - d0), dim=2)):
            torch.testing.assert_close(got, want)
    trace = compiler.last_traces(jfn)[-1]
    (region,) = [b for b in trace.bsyms if b.subsymbols]
    assert [p.name for p in region.args][:2] == ["a", "d0"]
    assert all(b.sym in (Prim.ADD, Prim.SUB) for b in trace.bsyms if not b.subsymbols)
    assert compiler.cache_stats(jfn).misses == 1
    assert {d.reason for d in compiler.examine.why_not_fused(jfn)} == {Reason.HOST}


def test_unknown_fusion_option_is_named():
    with pytest.raises(TypeError, match="min_size"):
        compiler.jit(lambda a: a, fusion={"min_size": 1})
    with pytest.raises(ValueError, match="runner"):
        FusionOptions(runner="cuda")


def test_a_region_with_a_reduction_never_reads_and_writes_one_buffer():
    # NOTE: found by scripts/fuzz_nvfuser.py on an H100: nvFuser ran the segment writing `a` before
    # the reduction reading it, so the sum saw the new values.
    def program(a):
        total = torch.sum(a, 0)
        a.add_(torch.neg(a))
        return total

    jfn = compiler.jit(program, executors=["nvfuser"], fusion={"runner": "torch"})
    a = torch.randn(5)
    expected, b = a.sum(0), a.clone()
    torch.testing.assert_close(jfn(b), expected)
    torch.testing.assert_close(b, torch.zeros(5))
    trace = compiler.last_traces(jfn)[-1]
    for region in (r for r in trace.bsyms if getattr(r.sym, "executor", None) == "nvfuser"):
        sums = [s for s in region.subsymbols if s.sym is Prim.SUM]
        writes = {s.args[1].name for s in region.subsymbols if s.sym is Prim.COPY_TO}
        reads = {p.name for s in region.subsymbols if s.sym is not Prim.COPY_TO for p in s.inputs}
        assert not (sums and writes & reads), str(trace)


def test_an_upcast_only_a_later_region_reads_moves_into_that_region():
    # h (bf16) is computed by one region; h.float() is read only by the residual add after a
    # matmul: the first region writes h, not a float32 copy of it, and the add converts h itself.
    def block(x, w):
        h = prims.convert_element_type(prims.add(prims.convert_element_type(x, torch.float32), 1.0), torch.bfloat16)
        up = prims.convert_element_type(h, torch.float32)
        projected = prims.convert_element_type(prims.matmul(h, w), torch.float32)
        return prims.convert_element_type(prims.add(up, projected), torch.bfloat16)

    bf16 = ((4, 8), torch.bfloat16)
    trace = prim_trace(block, bf16, ((8, 8), torch.bfloat16))
    result, _ = fused(trace)
    regions = [b for b in result.bsyms if getattr(b.sym, "executor", None) == "nvfuser"]
    assert [[p.dtype for p in r.outputs] for r in regions] == [[torch.bfloat16], [torch.bfloat16]]
    assert region_ops(result) == [
        ["convert_element_type", "add", "convert_element_type"],
        ["convert_element_type"] * 2 + ["add", "convert_element_type"],
    ]
    x, w = torch.randn(4, 8).bfloat16(), torch.randn(8, 8).bfloat16()
    torch.testing.assert_close(eval_trace(result, x, w), eval_trace(trace, x, w))


def test_a_region_of_views_and_their_copies_is_left_to_torch():
    # Keys and values sliced out of a fused QKV projection and copied (a DynamicCache's
    # `torch.cat` onto its empty tensor): in a fusion the copies are still a kernel each, and the
    # fusion's execute costs more host time than the torch copies.
    def program(qkv):
        parts = [
            prims.permute(prims.squeeze(prims.slice(qkv, [0, i, 0], [4, i + 1, 6], [1, 1, 1]), [1]), [1, 0])
            for i in range(3)
        ]
        return parts[0], prims.mul(parts[1], 1), prims.mul(parts[2], 1)

    trace = prim_trace(program, ((4, 3, 6), torch.float32))
    result, part = fused(trace)
    assert region_ops(result) == []
    assert set(reasons(part).values()) == {Reason.SHAPE_ONLY}
    qkv = torch.randn(4, 3, 6)
    for got, want in zip(eval_trace(result, qkv), eval_trace(trace, qkv)):
        torch.testing.assert_close(got, want)
    # a copy beside an op that computes stays fused
    result, _ = fused(prim_trace(lambda a: (prims.mul(a, 1), prims.sin(prims.mul(a, 2.0))), F32))
    assert [sorted(set(ops)) for ops in region_ops(result)] == [["mul", "sin"]]
