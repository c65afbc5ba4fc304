"""The nvFuser executor on CPU: executor selection, fallback, and generated definitions run end to
end against the torch-evaluated fake of nvfuser_direct (compiler/executors/nvfuser/diagnose/fake_nvfuser.py)."""

from __future__ import annotations

import warnings

import pytest
import torch

import compiler
from compiler.executors import default_executor_names, resolve
from compiler.executors.nvfuser.executor import (
    ExecutorUnavailableError,
    FusionFallbackWarning,
    NvFuserExecutor,
    TorchRunner,
    region_fusions,
    unavailable_reason,
)
from tests.support.nvfuser_cases import CASES, Case, flat, split3, tolerance, write_back
from tests.support.nvfuser_helpers import fake_nvfuser  # noqa: F401 - a fixture

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only behaviour")


def test_default_executors_without_nvfuser_are_torch_only():
    assert unavailable_reason() is not None
    assert default_executor_names() == ["torch"]
    assert [e.name for e in resolve(None)] == ["torch"]


def test_asking_for_nvfuser_explicitly_says_why_it_is_unavailable():
    with pytest.raises(ExecutorUnavailableError) as error:
        compiler.jit(lambda a: a + 1, executors=["nvfuser", "torch"])
    message = str(error.value)
    assert "CUDA is not available" in message and "nvfuser_direct" in message
    assert "runner='torch'" in message


def test_unknown_executor_is_named():
    with pytest.raises(ValueError, match="'nvfusr'"):
        compiler.jit(lambda a: a, executors=["nvfusr"])


def test_nvfuser_is_not_imported_with_the_compiler(tmp_path):
    import os
    import subprocess
    import sys

    (tmp_path / "nvfuser_direct.py").write_text("raise ImportError('imported nvfuser_direct')\n")
    code = (
        "import compiler, sys, torch; print(compiler.jit(lambda a: a + 1)(torch.ones(2)).tolist()); "
        "from compiler.executors.nvfuser.executor import unavailable_reason; print(unavailable_reason())"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.getcwd()])}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert result.stdout.splitlines()[0] == "[2.0, 2.0]"
    assert "CUDA is not available" in result.stdout  # checked first: no import attempted without CUDA


# ---------------------------------------------------------------------------------------------
# Fallback


def _failing(monkeypatch):
    calls = []

    def boom(self, fusion, args, key):
        calls.append(fusion.name)
        raise RuntimeError("nvFuser exploded\nsecond line")

    monkeypatch.setattr(TorchRunner, "run", boom)
    return calls


def program(a, b):
    return (a * 2 + b).sin()


def test_a_failing_fusion_falls_back_to_torch_with_one_warning(monkeypatch):
    calls = _failing(monkeypatch)
    jfn = compiler.jit(program, executors=["nvfuser"], fusion={"runner": "torch"})
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    with pytest.warns(FusionFallbackWarning, match=r"nvFusion0 \(RuntimeError: nvFuser exploded\)") as record:
        for _ in range(3):
            torch.testing.assert_close(jfn(a, b), program(a, b))
    assert len([w for w in record if issubclass(w.category, FusionFallbackWarning)]) == 1
    assert calls == ["nvFusion0"]  # not retried
    assert compiler.examine.stats(jfn).fallbacks == 1
    assert "FELL BACK: " in str(compiler.examine.fusions(jfn))


def test_fallback_off_surfaces_the_error(monkeypatch):
    _failing(monkeypatch)
    jfn = compiler.jit(program, executors=["nvfuser"], fusion={"runner": "torch"}, fallback=False)
    with pytest.raises(RuntimeError, match="nvFuser exploded"):
        jfn(torch.randn(4, 8), torch.randn(4, 8))
    monkeypatch.setenv("FUSEBENCH_NVFUSER_FALLBACK", "0")
    jfn = compiler.jit(program, executors=["nvfuser"], fusion={"runner": "torch"})
    with pytest.raises(RuntimeError, match="nvFuser exploded"):
        jfn(torch.randn(4, 8), torch.randn(4, 8))


# ---------------------------------------------------------------------------------------------
# Generated definitions, run against the fake


def jit_fake(fn, numbers="constant", **fusion):
    return compiler.jit(fn, numbers=numbers, executors=["nvfuser", "torch"], fusion=fusion)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_every_case_matches_eager_through_generated_definitions(case, fake_nvfuser):  # noqa: F811
    args = case.make("cpu")
    jfn = jit_fake(case.fn, min_region_size=1, **case.fusion)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FusionFallbackWarning)
        got = jfn(*args)
    for g, w in zip(flat(got), flat(case.fn(*args))):
        torch.testing.assert_close(g, w, **tolerance(w.dtype), equal_nan=True, check_dtype=case.check_dtype)
    assert region_fusions(compiler.last_traces(jfn)[-1]), "the case formed no fusion"
    assert compiler.examine.stats(jfn).definitions >= 1


def test_split3_defines_one_fusion_for_twenty_split_sizes(fake_nvfuser):  # noqa: F811
    jfn = jit_fake(split3, numbers="symbolic")
    a = torch.randn(8, 16, 64)
    for d0 in range(1, 21):
        for got, want in zip(jfn(a, d0, 8), split3(a, d0, 8)):
            torch.testing.assert_close(got, want)
    stats = compiler.examine.stats(jfn)
    assert compiler.cache_stats(jfn).misses == 1
    assert stats.definitions == 1
    # the fake compiles per input shape (real nvFuser reuses kernels); d0 = 1 first ran with torch
    assert (stats.compilations, stats.deferred) == (19, 1)


def test_a_new_layout_gets_its_own_definition_and_the_old_one_is_reused(fake_nvfuser):  # noqa: F811
    jfn = jit_fake(program)
    a = torch.randn(4, 8)
    b = torch.randn(8, 4).t()
    jfn(a, a)
    torch.testing.assert_close(jfn(a, b), program(a, b))
    jfn(a, a)
    stats = compiler.examine.stats(jfn)
    assert (stats.definitions, stats.compilations) == (2, 2)
    assert compiler.cache_stats(jfn).misses == 1  # strides are the fusion's business, not a retrace


def test_a_call_laid_out_as_the_last_reuses_its_key_and_layout_changes_pick_their_definition(fake_nvfuser, monkeypatch):  # noqa: F811
    from compiler.executors.nvfuser import executor as module

    reads = []
    monkeypatch.setattr(module, "stride", lambda t: reads.append(1) or t.stride())
    jfn = jit_fake(program)
    a, b, t = torch.randn(4, 8), torch.randn(4, 8), torch.randn(8, 4).t()
    jfn(a, b)
    (fusion,) = region_fusions(compiler.last_traces(jfn)[-1])
    before = len(reads)
    for _ in range(3):
        torch.testing.assert_close(jfn(a, b), program(a, b))
    assert len(reads) == before  # the C++ check said "laid out as the last call": no stride read
    for i in range(6):  # a layout that keeps changing: past LAYOUT_CHANGES, every call reads its strides
        y = t if i % 2 == 0 else b
        torch.testing.assert_close(jfn(a, y), program(a, y))
        assert fusion.last_inputs[1].stride == tuple(y.stride())
    assert len(reads) - before == 6 * len(fusion.last_inputs)
    assert (compiler.examine.stats(jfn).definitions, fusion._layout_changes) == (2, module.NvFusion.LAYOUT_CHANGES)
    assert len(fusion.runner.by_key) == 2


def test_after_its_first_call_a_definition_runs_through_the_executor_cache(fake_nvfuser, monkeypatch):  # noqa: F811
    jfn = jit_fake(program)
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    jfn(a, b)
    wrapper_calls = []
    original = fake_nvfuser.FusionDefinition.execute
    monkeypatch.setattr(
        fake_nvfuser.FusionDefinition,
        "execute",
        lambda fd, inputs, device=None: wrapper_calls.append(1) or original(fd, inputs, device),
    )
    for _ in range(3):
        torch.testing.assert_close(jfn(a, b), program(a, b))
    assert wrapper_calls == []  # `fd.fec.execute` directly, not `fd.execute`'s Python layer
    c = torch.randn(8, 4).t()  # a new layout: a new definition, whose first call goes through fd.execute
    torch.testing.assert_close(jfn(a, c), program(a, c))
    assert wrapper_calls == [1]


def test_a_call_laid_out_as_the_last_runs_its_execute_without_the_runner(fake_nvfuser, monkeypatch):  # noqa: F811
    from compiler.executors.nvfuser.executor import NvFuserRunner

    runs = []
    original = NvFuserRunner.run
    monkeypatch.setattr(NvFuserRunner, "run", lambda *a: runs.append(1) or original(*a))
    jfn = jit_fake(program)
    a, b, t = torch.randn(4, 8), torch.randn(4, 8), torch.randn(8, 4).t()
    for _ in range(3):
        torch.testing.assert_close(jfn(a, b), program(a, b))
    (fusion,) = region_fusions(compiler.last_traces(jfn)[-1])
    assert (len(runs), fusion.calls) == (1, 3)  # the first call only: then its execute alone
    torch.testing.assert_close(jfn(a, t), program(a, t))  # another layout: the runner again
    torch.testing.assert_close(jfn(a, t), program(a, t))
    assert (len(runs), fusion.calls) == (2, 5)
    assert fusion.last_inputs[1].stride == tuple(t.stride())


def test_a_call_that_needs_more_than_its_execute_keeps_the_runner(fake_nvfuser, monkeypatch):  # noqa: F811
    from compiler.executors.nvfuser.executor import NvFuserRunner

    runs = []
    original = NvFuserRunner.run
    monkeypatch.setattr(NvFuserRunner, "run", lambda *a: runs.append(1) or original(*a))
    jfn = jit_fake(lambda x, s: (x * s).sin(), numbers="symbolic")  # a scalar input: recorded every call
    x = torch.randn(4, 8)
    for s in (2.0, 3.0, 4.0):
        torch.testing.assert_close(jfn(x, s), (x * s).sin())
    assert len(runs) == 3
    (fusion,) = region_fusions(compiler.last_traces(jfn)[-1])
    assert fusion.last_inputs[-1].value == 4.0


def test_a_fusion_that_fails_on_its_bare_path_falls_back(fake_nvfuser, monkeypatch):  # noqa: F811
    jfn = jit_fake(program)
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    jfn(a, b)
    (fusion,) = region_fusions(compiler.last_traces(jfn)[-1])
    assert fusion._bare is not None

    def boom(inputs):
        raise RuntimeError("the kernel failed")

    fusion._bare = boom
    with pytest.warns(FusionFallbackWarning, match="the kernel failed"):
        torch.testing.assert_close(jfn(a, b), program(a, b))
    assert fusion._bare is None and fusion.fallback_error is not None
    torch.testing.assert_close(jfn(a, b), program(a, b))


def test_write_back_updates_the_buffer_in_place(fake_nvfuser):  # noqa: F811
    jfn = jit_fake(write_back)
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    x_eager = x.clone()
    expected = write_back(x_eager, y)
    buffer = x.data_ptr()
    torch.testing.assert_close(jfn(x, y), expected)
    torch.testing.assert_close(x, x_eager)
    assert x.data_ptr() == buffer
    source = compiler.examine.fusion_source_of(jfn, "nvFusion0")
    assert "alias_input=x" in source


def test_a_definition_the_fake_rejects_falls_back(fake_nvfuser, monkeypatch):  # noqa: F811
    monkeypatch.setattr(fake_nvfuser.FusionDefinition.ops, "sin", None)  # calling it raises TypeError
    jfn = jit_fake(program)
    a = torch.randn(4, 8)
    with pytest.warns(FusionFallbackWarning, match="TypeError"):
        torch.testing.assert_close(jfn(a, a), program(a, a))


def test_executor_claims_only_cuda_tensors_with_the_nvfuser_runner(fake_nvfuser, monkeypatch):  # noqa: F811
    monkeypatch.undo()
    from compiler.executors.nvfuser import executor as module

    monkeypatch.setattr(module, "unavailable_reason", lambda: None)
    jfn = compiler.jit(program, executors=["nvfuser"])
    jfn(torch.randn(4, 8), torch.randn(4, 8))
    assert region_fusions(compiler.last_traces(jfn)[-1]) == []
    assert {d.reason.name for d in compiler.examine.why_not_fused(jfn)} == {"DEVICE"}
    assert isinstance(jfn.options.executors[0], NvFuserExecutor)


def test_the_cases_put_every_translated_prim_into_a_fusion():
    from compiler.executors.nvfuser.define.translations import TRANSLATIONS

    fused = set()
    for case in [*CASES, Case("write_back", write_back, lambda d: (torch.randn(4, 8), torch.randn(4, 8)))]:
        jfn = compiler.jit(
            case.fn, executors=["nvfuser"], fusion={"runner": "torch", "min_region_size": 1, **case.fusion}
        )
        jfn(*case.make("cpu"))
        fused |= {b.sym for f in region_fusions(compiler.last_traces(jfn)[-1]) for b in f.region.bsyms}
    assert set(TRANSLATIONS) - fused == set()


def test_workarounds_are_checked_on_one_release_whatever_its_build() -> None:
    from compiler.executors.nvfuser.executor import WORKAROUNDS_CHECKED_ON, workarounds_checked

    assert workarounds_checked(WORKAROUNDS_CHECKED_ON) and workarounds_checked(f"{WORKAROUNDS_CHECKED_ON}+git0123abc")
    assert not workarounds_checked("0.2.37+git0123abc") and not workarounds_checked("fake")
