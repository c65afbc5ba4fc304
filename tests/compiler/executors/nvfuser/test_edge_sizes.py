"""Kernels for edge sizes (a symbolic size of 0 or 1) compiled only when those sizes come back."""

from __future__ import annotations

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import compiler
from compiler.core.executor import Region
from compiler.executors.nvfuser.executor import region_fusions
from compiler.executors.nvfuser.run.edge_sizes import EdgeSizes
from tests.support.nvfuser_cases import split3
from tests.support.nvfuser_helpers import fake_nvfuser  # noqa: F401 - a fixture


def jit_fake(fn, numbers="symbolic"):
    return compiler.jit(fn, numbers=numbers, executors=["nvfuser", "torch"])


def first_columns_then_scaled(a: torch.Tensor, n: int) -> torch.Tensor:
    b = a[:, :n] * 2
    a.mul_(3)  # written in place by the fusion: a deferred call must write it once
    return b.exp()


def test_a_first_size_one_runs_with_torch_and_compiles_when_it_comes_back(fake_nvfuser):  # noqa: F811
    jfn = jit_fake(split3)
    a = torch.randn(2, 3, 40)
    for d0 in (1, 2, 1, 3):
        for got, want in zip(jfn(a, d0, 8), split3(a, d0, 8)):
            torch.testing.assert_close(got, want)
    stats = compiler.examine.stats(jfn)
    # d0 = 1: torch; d0 = 2: compiled; d0 = 1 again: compiled now; d0 = 3: the fake compiles per shape
    assert (stats.deferred, stats.compilations) == (1, 3), stats


def test_sizes_away_from_the_edges_and_constant_sizes_compile_at_once(fake_nvfuser):  # noqa: F811
    a = torch.randn(2, 3, 40)
    symbolic = jit_fake(split3)
    symbolic(a, 2, 8)
    symbolic(a, 3, 8)
    constant = jit_fake(split3, numbers="constant")
    constant(a, 1, 8)  # a size 1 written in the trace, not a symbolic one: nothing to defer
    for jfn in (symbolic, constant):
        assert compiler.examine.stats(jfn).deferred == 0
    assert compiler.examine.stats(constant).compilations == 1


def test_a_deferred_call_writes_its_input_once_and_matches_eager(fake_nvfuser):  # noqa: F811
    jfn = jit_fake(first_columns_then_scaled)
    for seed, n in enumerate((1, 1, 3, 0)):
        a = torch.randn(4, 6, generator=torch.Generator().manual_seed(seed))
        want_a = a.clone()
        want = first_columns_then_scaled(want_a, n)
        torch.testing.assert_close(jfn(a, n), want)
        torch.testing.assert_close(a, want_a)
    assert compiler.examine.stats(jfn).deferred == 2  # n = 1 and n = 0, each the first time


def test_the_pattern_comes_from_the_region_inputs_and_unknown_sizes_defer_nothing(fake_nvfuser):  # noqa: F811
    jfn = jit_fake(split3)
    a = torch.randn(2, 3, 40)
    jfn(a, 2, 8)
    region = region_fusions(compiler.last_traces(jfn)[-1])[0].region  # inputs (a, d0, d0 + d1, 40)
    edges = EdgeSizes(region)
    # the first slice and its product are d0 = 1 wide; the last slice 40 - 39 = 1
    assert edges.pattern((a, 1, 9, 40)) == ((0, 2, 1), (3, 2, 1)), edges.pattern((a, 1, 9, 40))
    assert edges.pattern((a, 3, 39, 40)) == ((2, 2, 1), (5, 2, 1)), edges.pattern((a, 3, 39, 40))
    assert edges.pattern((a, 3, 11, 40)) == ()
    definition = object()
    assert edges.first_sight(definition, (a, 1, 9, 40)) and not edges.first_sight(definition, (a, 1, 9, 40))
    assert edges.first_sight(object(), (a, 1, 9, 40))  # another definition meets it for the first time
    unknown = Region(region.name, region.bsyms, region.inputs[:1], region.outputs)  # d0 and the ends unknown
    assert EdgeSizes(unknown).pattern((a,)) is None and not EdgeSizes(unknown).first_sight(definition, (a,))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=6))
def test_any_sequence_of_split_sizes_matches_eager_and_defers_each_edge_pattern_once(fake_nvfuser, sizes):  # noqa: F811
    compiler.clear_fusion_cache()  # each example starts without the definitions (and kernels) of the last
    jfn = jit_fake(split3)
    a = torch.randn(2, 3, 6)
    for d0, d1 in sizes:
        for got, want in zip(jfn(a, d0, d1), split3(a, d0, d1)):
            torch.testing.assert_close(got, want)
    # each split's edge sizes: which of its three parts (and so their results) are 0 or 1 wide;
    # the fake compiles per shape, so every pattern met for the first time is deferred, once
    patterns = {tuple((i, n) for i, n in enumerate((d0, d1, 6 - d0 - d1)) if n <= 1) for d0, d1 in sizes}
    assert compiler.examine.stats(jfn).deferred == len(patterns - {()})
