"""The fusebench-inductor variant, and the fusebench variant's default executors by device."""

from __future__ import annotations

import shutil

import pytest
import torch

import compiler
from compiler.executors import CPU_EXECUTORS_ENV
from compiler.executors import inductor as inductor_module
from fusebench.cases.variants import FUSEBENCH, FUSEBENCH_INDUCTOR, STANDARD_VARIANTS
from fusebench.measure.compiler_record import RECORD_FILE, record
from fusebench.measure.measure import Settings, measure_variant, prepare_case
from suites import llm_norms

CPU = torch.device("cpu")
SETTINGS = Settings(device=CPU, budget_s=0.005, min_repeats=2, cold_min_repeats=2)
needs_inductor = pytest.mark.skipif(
    inductor_module.unavailable_reason() is not None, reason=f"{inductor_module.unavailable_reason()}"
)


def _rms_norm():
    case = next(c for c in llm_norms.CASES if c.name == "rms_norm")
    return prepare_case("llm_norms", case, case.grid(quick=True)[0], SETTINGS)


def test_the_inductor_variant_is_standard_and_says_why_it_cannot_run(monkeypatch) -> None:
    assert FUSEBENCH_INDUCTOR in STANDARD_VARIANTS
    assert FUSEBENCH_INDUCTOR.unavailable(torch.device("meta")) == "Inductor compiles for CPU and CUDA only, not meta"
    monkeypatch.delenv(CPU_EXECUTORS_ENV)  # the CPU default: the fusebench variant runs Inductor already
    assert "runs its regions with Inductor already" in FUSEBENCH_INDUCTOR.unavailable(CPU)
    monkeypatch.setenv(CPU_EXECUTORS_ENV, "torch")
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    inductor_module._has_cxx_compiler.cache_clear()
    try:
        assert "needs a C++ compiler" in FUSEBENCH_INDUCTOR.unavailable(CPU)
    finally:
        inductor_module._has_cxx_compiler.cache_clear()


@needs_inductor
def test_the_variants_run_regions_with_inductor_on_cpu(monkeypatch) -> None:
    prepared = _rms_norm()
    outcome = measure_variant(prepared, FUSEBENCH_INDUCTOR, SETTINGS)
    assert outcome.status == "ok", outcome.detail
    assert outcome.fusions_per_call == 1
    # the fusebench variant takes the measured device's defaults: Inductor on CPU, unless configured
    monkeypatch.delenv(CPU_EXECUTORS_ENV)
    outcome = measure_variant(prepared, FUSEBENCH, SETTINGS)
    assert (outcome.status, outcome.fusions_per_call) == ("ok", 1), outcome.detail
    monkeypatch.setenv(CPU_EXECUTORS_ENV, "torch")
    outcome = measure_variant(prepared, FUSEBENCH, SETTINGS)
    assert (outcome.status, outcome.fusions_per_call) == ("ok", 0), outcome.detail


@needs_inductor
def test_the_compiler_record_keeps_inductor_regions_and_their_source() -> None:
    jfn = compiler.jit(llm_norms.rms_norm, executors=["inductor", "torch"])
    x, weight = torch.randn(8, 16), torch.randn(16)
    torch.testing.assert_close(jfn(x, weight), llm_norms.rms_norm(x, weight))
    files = record(jfn, segments=True)
    assert "errors.txt" not in files, files.get("errors.txt")
    assert "inductor0: " in files["fusions.txt"] and "runs with inductor" in files["fusions.txt"]
    assert files["fusions/inductor0.py"].startswith("def region(")
    assert '"runner": "inductor"' in files[RECORD_FILE] and "segments.txt" not in files
