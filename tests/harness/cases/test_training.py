"""Training steps in the harness: the backward's kernels (the step's minus the forward's) and
fusions recorded as their own metrics, stored, exposed to ASV and shown as 'forward+backward'."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from fusebench.cases import forward_of_step, training_step
from fusebench.cases.variants import EAGER, FUSEBENCH
from fusebench.errors import CaseError
from fusebench.measure import measure as measure_module
from fusebench.measure.measure import Settings, measure_variant, prepare_case
from fusebench.measure.outcome import FUSIONS_BACKWARD, KERNELS_BACKWARD, METRICS, Outcome
from fusebench.measure.stats import summarize
from fusebench.report.table import row_cells
from tests.support.fakes import tiny_case

CPU = Settings(device=torch.device("cpu"), budget_s=0.005, min_repeats=2)


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


def step_inputs(params, device, seed):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(params["n"], generator=generator).requires_grad_(True)
    return x, torch.randn(params["n"], generator=generator)


def gelu_step(**changes):
    fields = dict(fn=gelu_tanh, make_inputs=step_inputs, call=training_step, forward_call=forward_of_step)
    fields.update(changes)
    return tiny_case(**fields)


class OpCounter(TorchDispatchMode):
    """Counts aten calls: a stand-in for the kernels a call would launch on a GPU."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls += 1
        return func(*args, **(kwargs or {}))


def count_ops(run, device):
    with OpCounter() as counter:
        run()
    return counter.calls


def measure(case, variant):
    return measure_variant(prepare_case("tiny", case, case.grid(quick=True)[0], CPU), variant, CPU)


def test_backward_kernels_are_the_steps_minus_the_forwards(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(measure_module, "count_kernels", count_ops)
    outcome = measure(gelu_step(), EAGER)
    assert outcome.status == "ok", outcome.detail
    x, cotangent = torch.randn(8, requires_grad=True), torch.ones(8)
    forward = count_ops(lambda: gelu_tanh(x), None)
    assert outcome.kernels_per_call == count_ops(lambda: training_step(gelu_tanh, (x, cotangent)), None)
    assert outcome.kernels_backward == outcome.kernels_per_call - forward > 0
    assert outcome.fusions_backward is None  # eager has no fusions
    # a case without a forward part records no backward kernels
    assert measure(gelu_step(forward_call=None), EAGER).kernels_backward is None


def test_our_compilers_backward_trace_is_counted() -> None:
    outcome = measure(gelu_step(), FUSEBENCH)
    assert outcome.status == "ok", outcome.detail
    assert outcome.fusions_backward == 0  # the torch executor fuses nothing
    assert measure(tiny_case(), FUSEBENCH).fusions_backward is None  # no backward compiled


def test_backward_metrics_are_recorded_only_for_ok_outcomes() -> None:
    assert {KERNELS_BACKWARD.name, FUSIONS_BACKWARD.name} <= {m.name for m in METRICS}
    base = dict(suite="s", case="c", params={}, variant="v", device="cuda", kernels_backward=3, fusions_backward=1)
    ok = Outcome(**base, status="ok", timing=summarize([1e-3]), kernels_per_call=5, fusions_per_call=1)
    assert ok.metric_values()["track_kernels_backward"] == 3
    assert ok.metric_values()["track_fusions_backward"] == 1
    assert Outcome(**base, status="failed").metric_values()["track_fusions_backward"] is None
    assert row_cells(ok)[-2:] == ["2+3", "1+1"]  # kernels: forward+backward of the step's 5


def test_a_forward_part_needs_a_call() -> None:
    with pytest.raises(CaseError, match="forward_call is set but call is not"):
        tiny_case(forward_call=forward_of_step)


def test_the_backward_alone_gives_the_steps_gradients_each_call() -> None:
    from compiler import jit
    from fusebench.cases.training import backward_of_step

    x, cotangent = step_inputs({"n": 16}, "cpu", 0)
    (expected,) = training_step(gelu_tanh, (x, cotangent))[1]
    for fn in (gelu_tanh, jit(gelu_tanh)):
        backward = backward_of_step(fn, (x, cotangent))
        for _ in range(3):  # the forward's saved values stay for every call
            (gradient,) = backward()
            torch.testing.assert_close(gradient, expected)
    with pytest.raises(NotImplementedError, match="no autograd graph"):
        backward_of_step(gelu_tanh, (x.detach(), cotangent))
