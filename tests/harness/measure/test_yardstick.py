"""Eager's own error as the yardstick where a case's tolerance is tighter than eager can meet."""

from __future__ import annotations

import math

import pytest
import torch

from fusebench.cases.variants import EAGER
from fusebench.measure.correctness import Mismatch
from fusebench.measure.measure import Settings, measure_variant, prepare_case
from fusebench.measure.yardstick import EagerYardstick, judge, rms_errors
from tests.support.fakes import tiny_case, variant_from

CPU = torch.device("cpu")


def _inputs(params, device, seed):
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(params["n"], generator=generator).to(device),)


def rounded_exp(x: torch.Tensor) -> torch.Tensor:
    """exp through float16: about 1e-3 relative error, far above float32's default tolerance."""
    return x.half().exp().float()


def exact_exp(x: torch.Tensor) -> torch.Tensor:
    return x.exp()


def rounded_case(**changes):
    fields = {
        "name": "rounded_exp",
        "fn": rounded_exp,
        "reference": exact_exp,
        "make_inputs": _inputs,
        "params": {"n": [4096]},
    }
    fields.update(changes)
    return tiny_case(**fields)


def measure(case, variant, seed=0):
    settings = Settings(device=CPU, budget_s=0.01, min_repeats=3, seed=seed)
    prepared = prepare_case("tiny", case, case.grid(quick=True)[0], settings)
    return measure_variant(prepared, variant, settings)


def scaled_error(scale: float):
    """A variant computing eager's result with its error against exp scaled by `scale`."""

    def make(target):
        return lambda x: x.exp() + scale * (rounded_exp(x) - x.exp())

    return variant_from(f"error x{scale:g}", make)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_eager_passes_where_the_tolerance_is_tighter_than_its_own_error(seed) -> None:
    outcome = measure(rounded_case(), EAGER, seed)
    assert outcome.status == "ok", outcome.detail


@pytest.mark.parametrize("scale", [0.0, 0.5, 1.0, 1.8])
def test_a_variant_within_twice_eager_error_passes(scale) -> None:
    outcome = measure(rounded_case(), scaled_error(scale))
    assert outcome.status == "ok", outcome.detail


@pytest.mark.parametrize("scale", [3.0, 20.0])
def test_a_variant_beyond_twice_eager_error_fails_naming_both_errors(scale) -> None:
    outcome = measure(rounded_case(), scaled_error(scale))
    assert outcome.status == "failed"
    assert "eager misses that tolerance too, but output's RMS error" in outcome.detail
    assert "more than 2x eager's" in outcome.detail


def test_a_wrong_op_fails_even_where_eager_misses_the_tolerance() -> None:
    outcome = measure(rounded_case(), variant_from("expm1", lambda target: lambda x: torch.expm1(x)))
    assert outcome.status == "failed" and "eager misses that tolerance too" in outcome.detail


def test_a_nan_fails_even_where_eager_misses_the_tolerance() -> None:
    def make(target):
        def run(x):
            y = rounded_exp(x)
            y[3] = math.nan
            return y

        return run

    outcome = measure(rounded_case(), variant_from("nan", make))
    assert outcome.status == "failed" and "inf" in outcome.detail


def test_where_eager_meets_the_tolerance_a_variant_must_too() -> None:
    # eager is exact here: the float16 variant's error is not excused by eager's
    case = rounded_case(fn=exact_exp)
    outcome = measure(case, variant_from("half", lambda target: rounded_exp))
    assert outcome.status == "failed"
    assert "eager misses" not in outcome.detail and "exceed atol" in outcome.detail


def rounded_exp_(x: torch.Tensor) -> torch.Tensor:
    x.copy_(x.half().exp().float())
    return x.sum()


def exact_exp_(x: torch.Tensor) -> torch.Tensor:
    x.exp_()
    return x.sum()


def test_a_mutated_argument_is_judged_by_eager_error_too() -> None:
    case = rounded_case(
        fn=rounded_exp_, reference=exact_exp_, mutated_args=(0,), tolerances={torch.float32: (1e-6, 1e-6)}
    )
    assert measure(case, EAGER).status == "ok"

    def far(target):
        def run(x):
            x.copy_(x.exp() * 1.01)
            return x.sum()

        return run

    outcome = measure(case, variant_from("far", far))
    assert outcome.status == "failed" and "eager misses that tolerance too" in outcome.detail


def test_rms_errors_skip_integers_and_count_a_nan_the_reference_lacks() -> None:
    want = (torch.tensor([1.0, math.nan, 3.0]), torch.tensor([1, 2]))
    got = (torch.tensor([1.0, math.nan, 5.0]), torch.tensor([1, 3]))
    assert rms_errors(want, got, "output") == {"output[0]": pytest.approx(2 / math.sqrt(3))}
    assert math.isnan(rms_errors(torch.tensor([1.0]), torch.tensor([math.nan]), "output")["output"])


def test_judge_keeps_failures_of_structure_and_passes_within_the_multiplier() -> None:
    eager = EagerYardstick(meets_tolerance=False, rms={"output": 1.0})
    assert judge(Mismatch("output", math.inf, "shape differs"), {"output": 0.0}, eager) == "shape differs"
    assert judge(Mismatch("output", 0.5, "too far"), {"output": 2.0}, eager) is None
    assert "more than 2x" in judge(Mismatch("output", 0.5, "too far"), {"output": 2.1}, eager)
    assert judge(Mismatch("output", 0.5, "too far"), {"output": 0.1}, EagerYardstick(True, {"output": 1.0})) == (
        "too far"
    )
