"""duplicate_widenings: a shared upcast becomes one per fusible reader, so a float32 copy of a bf16
input no longer crosses between fusion regions."""

from __future__ import annotations

import torch

from compiler import prims
from compiler.executors import TORCH
from compiler.passes.duplicate_widenings import duplicate_widenings
from compiler.passes.fuse import fuse
from compiler.prims import Prim
from compiler.tracing.check_trace import check_trace
from compiler.tracing.interpreter import eval_trace
from tests.support.nvfuser_helpers import prim_trace, torch_fuser

BF16 = ((4, 8), torch.bfloat16)


def _norm_then_residual(x, w):
    """x.float() read by a sum of squares, by a scaling, and after a matmul by a residual add."""
    up = prims.convert_element_type(x, torch.float32)
    scale = prims.broadcast_in_dim(prims.sum(prims.mul(up, up), (1,)), [4, 8], [0])
    normed = prims.convert_element_type(prims.mul(up, scale), torch.bfloat16)
    projected = prims.convert_element_type(prims.matmul(normed, w), torch.float32)
    return prims.convert_element_type(prims.add(up, projected), torch.bfloat16)


def _upcasts(trace) -> list:
    return [b for b in trace.bsyms if b.sym is Prim.CONVERT_ELEMENT_TYPE and b.output.dtype == torch.float32]


def test_each_fusible_reader_after_the_first_gets_its_own_upcast_and_values_are_unchanged() -> None:
    trace = prim_trace(_norm_then_residual, BF16, ((8, 8), torch.bfloat16))
    result = check_trace(duplicate_widenings(trace))
    x_upcasts = [b for b in _upcasts(result) if b.args[0].name == "a0"]
    assert len(_upcasts(trace)) + 2 == len(_upcasts(result)) and len(x_upcasts) == 3  # up's 3 readers
    for upcast in x_upcasts:  # each copy has one fusible reader (the first keeps the original)
        assert sum(upcast.output.name in {p.name for p in b.inputs} for b in result.bsyms) == 1
    x, w = torch.randn(4, 8).bfloat16(), torch.randn(8, 8).bfloat16()
    torch.testing.assert_close(eval_trace(result, x, w), eval_trace(trace, x, w))


def test_no_region_hands_another_a_float32_copy_of_the_bf16_input() -> None:
    trace = prim_trace(_norm_then_residual, BF16, ((8, 8), torch.bfloat16))
    executors = [torch_fuser(), TORCH]

    def crossing(fused) -> list:
        regions = [b for b in fused.bsyms if getattr(b.sym, "executor", None) == "nvfuser"]
        read_later = {p.name for r in regions[1:] for p in r.inputs}
        return [p for r in regions for p in r.outputs if p.dtype == torch.float32 and p.name in read_later]

    assert [p.shape for p in crossing(fuse(trace, executors))] == [(4, 8)]  # without the pass: x.float()
    fused = check_trace(fuse(duplicate_widenings(trace), executors))
    assert crossing(fused) == []
    x, w = torch.randn(4, 8).bfloat16(), torch.randn(8, 8).bfloat16()
    torch.testing.assert_close(eval_trace(fused, x, w), eval_trace(trace, x, w))


def test_a_trace_without_shared_upcasts_is_unchanged() -> None:
    trace = prim_trace(lambda a: prims.sin(prims.convert_element_type(a, torch.float32)), BF16)
    assert [b.sym for b in duplicate_widenings(trace).bsyms] == [b.sym for b in trace.bsyms]


def _rotations(x, wq, wk):
    """A rotary's cos, computed once and broadcast to the query's 3 heads and the key's 2 (the key's
    broadcast read twice, once upcast: a chain), read behind a matmul each (the regions reading
    them cannot hold the cos)."""
    c = prims.cos(x)
    t = prims.sin(c)
    mq, mk = prims.matmul(t, wq), prims.matmul(t, wk)
    q = prims.mul(prims.broadcast_in_dim(mq, [3, 4, 8], [1, 2]), prims.broadcast_in_dim(c, [3, 4, 8], [1, 2]))
    ck = prims.broadcast_in_dim(c, [2, 4, 8], [1, 2])
    k = prims.mul(prims.broadcast_in_dim(mk, [2, 4, 8], [1, 2]), ck)
    k2 = prims.mul(prims.convert_element_type(ck, torch.float64), prims.convert_element_type(k, torch.float64))
    return prims.sin(q), prims.exp(k2)


def test_regions_read_a_broadcast_value_as_it_was_before_the_broadcast_and_then_merge() -> None:
    # the cos's region used to write each broadcast ([3, 4, 8], [2, 4, 8]) for the others to read
    # (three regions); now it writes the cos, and the query's and key's regions, reading it, merge
    F32 = ((4, 8), torch.float32)
    trace = prim_trace(_rotations, F32, ((8, 8), torch.float32), ((8, 8), torch.float32))
    fused = check_trace(fuse(duplicate_widenings(trace), [torch_fuser(), TORCH]))
    first, rotations = (b for b in fused.bsyms if getattr(b.sym, "executor", None) == "nvfuser")
    assert [tuple(p.shape) for p in first.outputs] == [(4, 8), (4, 8)]  # the cos, and sin(cos) for the matmuls
    assert {tuple(p.shape) for p in rotations.inputs} == {(4, 8)}
    x, wq, wk = torch.randn(4, 8), torch.randn(8, 8), torch.randn(8, 8)
    for got, want in zip(eval_trace(fused, x, wq, wk), eval_trace(trace, x, wq, wk)):
        torch.testing.assert_close(got, want)


def _reduced_and_resized(x, wq, wk):
    """The cos's region also sums and concatenates (nvFuser segments such a region); one broadcast of
    the cos is read by two regions behind matmuls."""
    c = prims.cos(x)
    t = prims.cat([c, prims.broadcast_in_dim(prims.sum(c, (1,)), [4, 1], [0])], 1)
    mq, mk = prims.matmul(t, wq), prims.matmul(t, wk)
    cb = prims.broadcast_in_dim(c, [2, 4, 8], [1, 2])
    q = prims.mul(prims.broadcast_in_dim(mq, [2, 4, 8], [1, 2]), cb)
    k = prims.mul(prims.broadcast_in_dim(mk, [2, 4, 8], [1, 2]), cb)
    return prims.sin(q), prims.exp(k)


def test_a_region_that_reduces_and_resizes_keeps_writing_the_broadcast_once() -> None:
    # nvFuser 0.2.36 failed to compile a segment of such a region once its outputs changed (a Llama
    # backward's): it writes the broadcast, as before, and its copies are dropped again
    F32 = ((4, 8), torch.float32)
    trace = prim_trace(_reduced_and_resized, F32, ((9, 8), torch.float32), ((9, 8), torch.float32))
    fused = check_trace(fuse(duplicate_widenings(trace), [torch_fuser(), TORCH]))
    first, *_ = (b for b in fused.bsyms if getattr(b.sym, "executor", None) == "nvfuser")
    assert sorted(tuple(p.shape) for p in first.outputs) == [(2, 4, 8), (4, 9)]
    broadcasts = [b for r in fused.bsyms for b in (r.subsymbols or (r,)) if b.sym is Prim.BROADCAST_IN_DIM]
    assert len([b for b in broadcasts if b.args[0].name == "t0"]) == 1  # the cos's, not a copy per reader
    x, wq, wk = torch.randn(4, 8), torch.randn(9, 8), torch.randn(9, 8)
    for got, want in zip(eval_trace(fused, x, wq, wk), eval_trace(trace, x, wq, wk)):
        torch.testing.assert_close(got, want)
