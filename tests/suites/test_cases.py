"""Every bundled case at quick sizes: eager (and each case's own baselines) match the reference;
our compiler either matches it or says what it does not support; dynamic_split's and dynamic_lengths'
compilations."""

from __future__ import annotations

import pytest
import torch

from fusebench.cases.discovery import discover
from fusebench.cases.variants import EAGER, FUSEBENCH
from fusebench.measure.measure import Settings, measure_variant, prepare_case

CPU_SETTINGS = Settings(device=torch.device("cpu"), budget_s=0.005, min_repeats=2, cold_min_repeats=2)
# NOTE: the Hugging Face zoo's 56 quick models take minutes; tests/suites/test_hf_zoo.py runs a few
# by default and the rest as slow tests
SLOW_SUITES = {"hf_zoo"}
GROUPS = [
    pytest.param(
        suite.name,
        case,
        params,
        id=f"{case.name}-{'-'.join(str(v) for v in params.values())}",
        marks=[pytest.mark.slow] if suite.name in SLOW_SUITES else [],
    )
    for suite in discover()
    for case in suite.cases
    for params in case.grid(quick=True)
]


@pytest.mark.parametrize(("suite", "case", "params"), GROUPS)
def test_eager_and_case_baselines_match_the_reference(suite, case, params) -> None:
    prepared = prepare_case(suite, case, params, CPU_SETTINGS)
    assert prepared.error is None
    for variant in (EAGER, *case.extra_variants):
        outcome = measure_variant(prepared, variant, CPU_SETTINGS)
        if outcome.status == "skipped":
            assert outcome.detail  # e.g. nvFuser without CUDA, eager under cache='symbolic'
            continue
        assert outcome.status == "ok", f"{variant.name}: {outcome.detail}"


@pytest.mark.parametrize(("suite", "case", "params"), [g for g in GROUPS if g.values[1].forward_call is None])
def test_our_compiler_matches_or_reports_unsupported(suite, case, params) -> None:
    # NOTE: training steps must be ok, through the compiler's autodiff: tests/suites/test_training_steps.py
    prepared = prepare_case(suite, case, params, CPU_SETTINGS)
    outcome = measure_variant(prepared, FUSEBENCH, CPU_SETTINGS)
    assert outcome.status in ("ok", "unsupported"), outcome.detail
    if outcome.status == "unsupported":
        assert "not supported" in outcome.detail


def test_dynamic_split_compiles_twice_with_constants_and_once_symbolically() -> None:
    (suite,) = [s for s in discover() if s.name == "dynamic_split"]
    (case,) = suite.cases
    recompilations = {}
    for params in case.grid(quick=True):
        outcome = measure_variant(prepare_case(suite.name, case, params, CPU_SETTINGS), FUSEBENCH, CPU_SETTINGS)
        assert outcome.status == "ok", outcome.detail
        recompilations[params["cache"]] = outcome.recompilations
    assert recompilations == {"constant": 1, "symbolic": 0}  # automatic dynamic: 2 compilations vs 1


def test_dynamic_lengths_compiles_twice_for_twenty_lengths() -> None:
    (suite,) = [s for s in discover() if s.name == "dynamic_lengths"]
    (case,) = suite.cases
    (params,) = case.grid(quick=True)
    outcome = measure_variant(prepare_case(suite.name, case, params, CPU_SETTINGS), FUSEBENCH, CPU_SETTINGS)
    assert outcome.status == "ok", outcome.detail
    assert outcome.recompilations == 1  # automatic dynamic: the length is symbolic from the second call


def test_host_overhead_stays_runnable_as_a_module(capsys: pytest.CaptureFixture) -> None:
    from suites import host_overhead

    assert host_overhead.main(["--calls", "20", "--batches", "1"]) == 0
    assert "1-op" in capsys.readouterr().out
