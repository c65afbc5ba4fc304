"""Variants: availability reasons, fusion counting, and compilation counters."""

from __future__ import annotations

import importlib.util
import shutil

import pytest
import torch

from compiler.core.ir import BoundSymbol, Symbol, TensorProxy, Trace
from compiler.prims import Prim
from fusebench.cases import variants
from fusebench.cases.variants import EAGER, THUNDER, TORCH_COMPILE, SkipVariant, Target, count_fusions
from tests.support.nvfuser_helpers import fake_nvfuser  # noqa: F401 - a fixture

CPU = torch.device("cpu")


def target(fn, *args, **options) -> Target:
    return Target(fn, args, {}, options, CPU)


def test_fusions_are_executor_claimed_symbols_only() -> None:
    x = TensorProxy((4,), torch.float32, CPU, name="x")
    y = TensorProxy((4,), torch.float32, CPU, name="y")
    z = TensorProxy((4,), torch.float32, CPU, name="z")
    bsyms = [
        BoundSymbol(Prim.ADD, (x, x), {}, y),  # a prim left to the torch executor
        BoundSymbol(Symbol("torch.sin"), (y,), {}, z),  # a torch-level op
        BoundSymbol(Symbol("nvFusion0", executor="nvfuser"), (z,), {}, x),  # a fusion region
    ]
    assert count_fusions(Trace((x,), bsyms, x)) == 1


def test_torch_compile_on_cpu_needs_a_cpp_compiler(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert TORCH_COMPILE.unavailable(CPU) == (
        "torch.compile on CPU needs a C++ compiler (no $CXX, g++, c++ or clang++ on PATH)"
    )
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/g++" if name == "g++" else None)
    assert TORCH_COMPILE.unavailable(CPU) is None


def test_thunder_is_skipped_with_a_reason_when_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(variants.importlib.util, "find_spec", lambda name: None if name == "thunder" else real(name))
    assert THUNDER.unavailable(CPU) == "lightning-thunder is not installed (pip install lightning-thunder)"


def test_eager_is_measured_once_whatever_the_cache_mode() -> None:
    assert EAGER.prepare(target(torch.sin, cache="constant")).fn is torch.sin
    with pytest.raises(SkipVariant, match="eager has no compile cache"):
        EAGER.prepare(target(torch.sin, cache="symbolic"))


def test_torch_compile_counts_its_compilations() -> None:
    compiled = TORCH_COMPILE.prepare(target(lambda x: x * 2 + 1))
    assert compiled.compilations() == 0
    compiled.fn(torch.ones(4))
    compiled.fn(torch.ones(4))
    assert compiled.compilations() == 1
    compiled.fn(torch.ones(6))  # a new shape: Dynamo recompiles (with a dynamic size)
    assert compiled.compilations() == 2


def test_each_fusebench_preparation_defines_its_fusions_afresh(fake_nvfuser) -> None:  # noqa: F811
    import compiler

    prepare = variants.fusebench_prepare(["nvfuser", "torch"])
    for _ in range(2):  # the second would reuse the first one's definitions without the reset
        compiled = prepare(target(lambda x: (x * 2).sin()))
        compiled.fn(torch.ones(4))
        assert compiler.examine.stats(compiled.program).definitions == 1
