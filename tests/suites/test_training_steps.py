"""Training-step cases at quick sizes: our compiler runs them through its own autodiff and matches
eager forward + backward; the check catches a wrong gradient; GELU's backward is one fusion."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from fusebench.cases.discovery import discover
from fusebench.cases.variants import EAGER, FUSEBENCH, Variant, fusebench_prepare
from fusebench.measure.measure import Settings, check_result, measure_variant, prepare_case
from tests.support.nvfuser_helpers import fake_nvfuser  # noqa: F401 - a fixture

CPU_SETTINGS = Settings(device=torch.device("cpu"), budget_s=0.005, min_repeats=2)
# NOTE: what the compiler cannot trace yet, by (case, model): strict, so a fix shows up here.
KNOWN_FAILURES: dict[tuple[str, str], str] = {}


def _step(suite: str, case, params: dict):
    model = f"-{params['model']}" if "model" in params else ""
    return pytest.param(suite, case, params, id=f"{case.name}{model}-{params['dtype']}")


STEPS = [
    _step(suite.name, case, params)
    for suite in discover()
    for case in suite.cases
    if case.forward_call is not None
    for params in case.grid(quick=True)
]


@pytest.mark.parametrize(("suite", "case", "params"), STEPS)
def test_our_compiler_differentiates_every_training_step_itself(suite, case, params, request) -> None:
    if reason := KNOWN_FAILURES.get((case.name, params.get("model"))):
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))
    outcome = measure_variant(prepare_case(suite, case, params, CPU_SETTINGS), FUSEBENCH, CPU_SETTINGS)
    assert outcome.status == "ok", outcome.detail
    # a backward trace exists: the gradients came from the compiler's backward, not from torch
    # autograd recording the torch executor's calls
    assert outcome.fusions_backward is not None


class _ScaledGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad * 1.25


@pytest.mark.parametrize(("suite", "case", "params"), STEPS)
def test_a_gradient_off_by_a_quarter_fails_the_check(suite, case, params) -> None:
    prepared = prepare_case(suite, case, params, CPU_SETTINGS)
    differentiable = [i for i, a in enumerate(prepared.args[:-1]) if isinstance(a, torch.Tensor) and a.requires_grad]
    for index in differentiable:

        def wrong(*inputs, index=index):
            inputs = list(inputs)
            inputs[index] = _ScaledGradient.apply(inputs[index])
            return case.fn(*inputs)

        output = case.run(wrong, prepared.args)
        problem = check_result(prepared, output)
        assert problem is not None, f"a 25% error in the gradient of argument {index} passed"
        assert problem[0].startswith(f"output[1][{differentiable.index(index)}]")
    assert check_result(prepared, case.run(case.fn, prepared.args)) is None


def test_the_gelu_steps_are_one_forward_and_one_backward_fusion(fake_nvfuser) -> None:  # noqa: F811
    nvfuser = Variant("fusebench-nvfuser", fusebench_prepare(["nvfuser", "torch"]))
    (suite,) = [s for s in discover() if s.name == "gelu_backward"]
    for case in (c for c in suite.cases if c.forward_call is not None):
        prepared = prepare_case(suite.name, case, case.grid(quick=True)[0], CPU_SETTINGS)
        outcome = measure_variant(prepared, nvfuser, CPU_SETTINGS)
        assert outcome.status == "ok", outcome.detail
        assert (outcome.fusions_per_call, outcome.fusions_backward) == (1, 1), case.name


def test_eager_steps_report_no_fusions_and_no_kernels_on_cpu() -> None:
    (suite,) = [s for s in discover() if s.name == "training_steps"]
    case = suite.cases[0]
    outcome = measure_variant(
        prepare_case(suite.name, case, case.grid(quick=True)[0], CPU_SETTINGS), EAGER, CPU_SETTINGS
    )
    assert outcome.status == "ok", outcome.detail
    assert (outcome.kernels_per_call, outcome.kernels_backward, outcome.fusions_backward) == (None, None, None)
    assert dataclasses.replace(case, forward_call=None).forward_call is None
