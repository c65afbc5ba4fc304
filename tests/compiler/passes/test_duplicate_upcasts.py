"""duplicate_upcasts: a shared upcast becomes one per fusible reader, so a float32 copy of a bf16
input no longer crosses between fusion regions."""

from __future__ import annotations

import torch

from compiler import prims
from compiler.executors import TORCH
from compiler.passes.duplicate_upcasts import duplicate_upcasts
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
    result = check_trace(duplicate_upcasts(trace))
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
    fused = check_trace(fuse(duplicate_upcasts(trace), executors))
    assert crossing(fused) == []
    x, w = torch.randn(4, 8).bfloat16(), torch.randn(8, 8).bfloat16()
    torch.testing.assert_close(eval_trace(fused, x, w), eval_trace(trace, x, w))


def test_a_trace_without_shared_upcasts_is_unchanged() -> None:
    trace = prim_trace(lambda a: prims.sin(prims.convert_element_type(a, torch.float32)), BF16)
    assert [b.sym for b in duplicate_upcasts(trace).bsyms] == [b.sym for b in trace.bsyms]
