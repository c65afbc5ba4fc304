"""FusionDefinitions shared by structure: identical per-parameter regions are defined once (on CPU,
against the torch-evaluated fake of nvfuser_direct)."""

from __future__ import annotations

import pytest
import torch

import compiler
from compiler.executors.nvfuser import executor as nvfuser_module
from compiler.executors.nvfuser.define.descriptors import structure_key
from compiler.executors.nvfuser.define.translations import fusion_source
from compiler.executors.nvfuser.diagnose import fake_nvfuser as fake_api
from compiler.executors.nvfuser.executor import region_fusions
from compiler.executors.nvfuser.run.shared_definitions import SharedDefinitions
from tests.support.nvfuser_helpers import fake_nvfuser  # noqa: F401 - a fixture


def adam_like(params, grads, exp_avgs, step: int, lr: float):
    scale = lr / (1 - 0.9**step)
    for p, g, m in zip(params, grads, exp_avgs):
        m.lerp_(g, 0.1)
        p.sub_(m * scale / (g.abs() + 1e-8).sqrt())


def _state(shapes, seed: int):
    gen = torch.Generator().manual_seed(seed)
    return tuple([torch.randn(s, generator=gen) for s in shapes] for _ in range(3))


def _run(shapes, seed: int, numbers: str = "constant", steps=(3,), **fusion):
    fusion.setdefault("batch_numel", 0)  # one region per parameter: not batched (test_batch_regions.py)
    state = _state(shapes, seed)
    expected = tuple([t.clone() for t in ts] for ts in state)
    jfn = compiler.jit(adam_like, numbers=numbers, executors=["nvfuser", "torch"], fusion=fusion)
    for step in steps:
        jfn(*state, step, 1e-2)
        adam_like(*expected, step, 1e-2)
    for got, want in zip(state, expected):
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w)
    return jfn


@pytest.mark.parametrize("seed", [0, 1])
def test_identical_per_parameter_regions_share_one_definition(fake_nvfuser, seed):  # noqa: F811
    shapes = [(8, 4)] * 3 + [(5, 7)] * 2 + [(16, 16)]
    jfn = _run(shapes, seed, merge_same_shape=False)
    assert len(region_fusions(compiler.last_traces(jfn)[-1])) == len(shapes)
    stats = compiler.examine.stats(jfn)
    assert (stats.definitions, stats.reused) == (1, len(shapes) - 1)  # one rank, one dtype: one structure


def test_ranks_and_dtypes_are_different_structures(fake_nvfuser):  # noqa: F811
    jfn = _run([(6,), (9,), (4, 4), (3, 5), (2, 2, 2)], seed=0, merge_same_shape=False)
    stats = compiler.examine.stats(jfn)
    assert (stats.definitions, stats.reused) == (3, 2)


def test_a_symbolic_step_shared_by_every_region_does_not_merge_them(fake_nvfuser):  # noqa: F811
    jfn = _run([(8, 4)] * 4, seed=2, numbers="symbolic", steps=(3, 4, 5), merge_same_shape=False)
    assert len(region_fusions(compiler.last_traces(jfn)[-1])) == 4
    assert compiler.examine.stats(jfn).definitions == 1


def test_same_shape_regions_stay_apart_by_default_and_merge_when_asked(fake_nvfuser):  # noqa: F811
    jfn = _run([(8, 4)] * 4, seed=3)
    assert len(region_fusions(compiler.last_traces(jfn)[-1])) == 4
    assert compiler.examine.stats(jfn).definitions == 1
    jfn = _run([(8, 4)] * 4, seed=3, merge_same_shape=True)
    assert len(region_fusions(compiler.last_traces(jfn)[-1])) == 1


def test_structure_key_ignores_names_and_keeps_everything_else(fake_nvfuser):  # noqa: F811
    jfn = _run([(8, 4)] * 2 + [(3,)], seed=4, merge_same_shape=False)
    fusions = region_fusions(compiler.last_traces(jfn)[-1])
    sources = [fusion_source(f.region, f.descriptors())[0] for f in fusions]
    assert sources[0] != sources[1]  # different proxies, different names
    keys = [structure_key(s) for s in sources]
    assert keys[0] == keys[1] and keys[0] != keys[2]
    assert structure_key(sources[0].replace("1e-08", "1e-07")) != keys[0]
    assert structure_key(sources[0].replace("fd.ops.sqrt", "fd.ops.rsqrt")) != keys[0]
    assert "DataType.Float" in keys[0] and "stride_order=" in keys[0]


def test_structure_key_renames_variables_only_where_they_are_read():
    source = (
        "def nvfusion_3(fd):\n"
        "    shape = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float, stride_order=[0])\n"
        "    t1 = fd.ops.mul(shape, fd.define_scalar(1e-05, dtype=DataType.Float))\n"
        "    t1_out = fd.ops.reshape(t1 , new_shape=[shape, 't1'])\n"
        "    fd.add_output(t1_out)\n"
    )
    key = structure_key(source)
    assert key == (
        "def fusion(fd):\n"
        "    v1 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float, stride_order=[0])\n"
        "    v2 = fd.ops.mul(v1, fd.define_scalar(1e-05, dtype=DataType.Float))\n"
        "    v3 = fd.ops.reshape(v2 , new_shape=[v1, 't1'])\n"
        "    fd.add_output(v3)\n"
    )
    renamed = source.replace("shape = fd", "x = fd").replace("(shape,", "(x,").replace("[shape,", "[x,")
    assert structure_key(renamed) == key
    assert structure_key(source.replace("'t1'", "'t2'")) != key


def test_a_function_jitted_again_reuses_the_definitions_and_their_kernels(fake_nvfuser):  # noqa: F811
    shapes = [(8, 4)] * 2 + [(3,)]
    first = compiler.examine.stats(_run(shapes, seed=5, merge_same_shape=False))
    assert (first.definitions, first.reused, first.compilations) == (2, 1, 2)  # one kernel per structure and shape
    again = compiler.examine.stats(_run(shapes, seed=6, merge_same_shape=False))
    assert (again.definitions, again.reused, again.compilations) == (0, 3, 0)  # kernels compiled for `first`


def test_clear_fusion_cache_makes_the_next_compilation_define_and_compile_afresh(fake_nvfuser):  # noqa: F811
    shapes = [(8, 4)] * 2
    _run(shapes, seed=7, merge_same_shape=False)
    compiler.clear_fusion_cache()
    stats = compiler.examine.stats(_run(shapes, seed=7, merge_same_shape=False))
    assert (stats.definitions, stats.reused, stats.compilations) == (1, 1, 1)


def test_another_nvfuser_module_never_sees_these_definitions(fake_nvfuser, monkeypatch):  # noqa: F811
    _run([(8, 4)], seed=8)
    other = fake_api.module()
    monkeypatch.setattr(nvfuser_module, "nvfuser_direct", lambda: other)
    assert compiler.examine.stats(_run([(8, 4)], seed=8)).definitions == 1


def test_shared_definitions_keep_the_most_recently_used():
    shared = SharedDefinitions(capacity=2)
    shared.put("m", "a", 1)
    shared.put("m", "b", 2)
    assert shared.get("m", "a") == 1  # now the most recent
    shared.put("m", "c", 3)
    assert (shared.get("m", "a"), shared.get("m", "b"), shared.get("m", "c"), len(shared)) == (1, None, 3, 2)
    assert shared.get("other module", "a") is None
    shared.clear()
    assert len(shared) == 0
