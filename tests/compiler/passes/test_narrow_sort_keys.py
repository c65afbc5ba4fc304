"""narrow_sort_keys: an argsort of indices (topk's, argsort's, an iota's, carried through views,
gathers, concatenation and conversions) sorts them in the narrowest integer dtype that holds them,
with the same indices; anything else is left as it is."""

from __future__ import annotations

import pytest
import torch

import compiler
from compiler import prims
from compiler.passes.narrow_sort_keys import narrow_sort_keys, value_ranges
from compiler.prims import Prim
from compiler.tracing.check_trace import check_trace
from compiler.tracing.interpreter import eval_trace
from tests.support.nvfuser_helpers import prim_trace

I64 = torch.int64


def _sorted_dtypes(trace) -> list[torch.dtype]:
    return [b.args[0].dtype for b in trace.bsyms if b.sym is Prim.ARGSORT]


def _routing(experts: int, stable: bool = True):
    """A mixture of experts' routing: each token's two experts, flattened, sorted by expert."""

    def route(scores):
        chosen = prims.topk(scores, 2, 1, True, True)
        return prims.argsort(prims.reshape(chosen, [scores.shape[0] * 2]), 0, False, stable)

    return route


@pytest.mark.parametrize(("experts", "narrow"), [(8, torch.uint8), (256, torch.uint8), (300, torch.int16)])
def test_the_experts_a_router_picked_are_sorted_in_the_narrowest_dtype_with_the_same_indices(experts, narrow):
    trace = prim_trace(_routing(experts), ((64, experts), torch.float32))
    narrowed = check_trace(narrow_sort_keys(trace))
    assert (_sorted_dtypes(trace), _sorted_dtypes(narrowed)) == ([I64], [narrow])
    for seed in range(3):
        generator = torch.Generator().manual_seed(seed)
        scores = torch.randint(0, 3, (64, experts), generator=generator).float()  # many ties, many equal keys
        assert torch.equal(eval_trace(narrowed, scores), eval_trace(trace, scores))


def test_a_sort_that_need_not_be_stable_is_left_alone_off_cuda():
    trace = prim_trace(_routing(8, stable=False), ((64, 8), torch.float32))
    assert _sorted_dtypes(narrow_sort_keys(trace)) == [I64]


def test_keys_of_unknown_range_are_left_alone():
    trace = prim_trace(lambda keys: prims.argsort(keys, 0, False, True), ((100,), I64))
    assert narrow_sort_keys(trace) is trace  # no pass shows in the trace list


def test_ranges_follow_iota_concatenation_and_conversions():
    def fn(scores):
        chosen = prims.convert_element_type(prims.topk(scores, 1, 1, True, True), torch.int32)  # [0, 9]
        shifted = prims.iota(16, -5, 1, I64, scores.device)  # [-5, 10]
        both = prims.cat([prims.convert_element_type(prims.reshape(chosen, [16]), I64), shifted], 0)
        return prims.argsort(both, 0, True, True), prims.argsort(
            prims.iota(70_000, 0, 1, I64, scores.device), 0, False, True
        )

    trace = prim_trace(fn, ((16, 10), torch.float32))
    ranges = value_ranges(trace)
    first, second = (b for b in trace.bsyms if b.sym is Prim.ARGSORT)
    assert (ranges[first.args[0].name], ranges[second.args[0].name]) == ((-5, 10), (0, 69_999))
    narrowed = check_trace(narrow_sort_keys(trace))
    assert _sorted_dtypes(narrowed) == [torch.int16, torch.int32]
    scores = torch.randn(16, 10)
    for got, want in zip(eval_trace(narrowed, scores), eval_trace(trace, scores)):
        assert torch.equal(got, want)


def test_a_jitted_router_sorts_narrow_keys_and_matches_eager():
    def route(scores):
        experts = torch.topk(scores.softmax(-1), 2, dim=-1).indices
        order = torch.argsort(experts.flatten(), stable=True)
        return order, order.argsort(stable=True)

    jfn = compiler.jit(route)
    for seed in range(3):
        scores = torch.randint(0, 4, (33, 8), generator=torch.Generator().manual_seed(seed)).float()
        for got, want in zip(jfn(scores), route(scores)):
            assert torch.equal(got, want)
    assert _sorted_dtypes(compiler.last_traces(jfn)[-1]) == [torch.uint8, torch.uint8]


@pytest.mark.gpu
@pytest.mark.parametrize("tokens", [500, 4096])  # sorts of 1000 keys (a short row) and of 8192 (a radix sort)
def test_on_cuda_a_router_sort_that_need_not_be_stable_gives_eagers_indices(tokens):
    def route(scores):
        experts = torch.topk(scores, 2, dim=-1).indices
        return torch.argsort(experts.flatten())

    jfn = compiler.jit(route)
    for seed in range(3):
        scores = torch.randint(0, 3, (tokens, 8), generator=torch.Generator().manual_seed(seed)).float().cuda()
        assert torch.equal(jfn(scores), route(scores))
    assert _sorted_dtypes(compiler.last_traces(jfn)[-1]) == [torch.uint8]
