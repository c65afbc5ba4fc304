"""measure_variant: correctness before timing, compile time, counters, in-place restoration, statuses."""

from __future__ import annotations

import pytest
import torch

from fusebench.cases.variants import EAGER, FUSEBENCH, Compiled, SkipVariant, Variant
from fusebench.measure.measure import Settings, measure_variant, prepare_case
from fusebench.measure.outcome import TIME
from tests.support.fakes import FakeClock, ScriptedTimer, double, tiny_case, variant_from

CPU = torch.device("cpu")


def measure(case, variant, settings=None, **kwargs):
    settings = settings or Settings(device=CPU, budget_s=0.01, min_repeats=3)
    prepared = prepare_case("tiny", case, case.grid(quick=True)[0], settings)
    return measure_variant(prepared, variant, settings, **kwargs)


def test_a_wrong_variant_is_a_failure_with_its_max_error_and_no_time() -> None:
    wrong = variant_from("wrong", lambda target: lambda x: x * 2 + 1e-3)
    outcome = measure(tiny_case(), wrong)
    assert outcome.status == "failed"
    assert "max abs error 0.001" in outcome.detail and outcome.detail.startswith("output")
    assert outcome.extra["max_abs_error"] == pytest.approx(1e-3, rel=1e-3)  # float32 rounding of 1e-3
    assert outcome.timing is None and outcome.compile_seconds is None
    assert all(value is None for value in outcome.metric_values().values())


def test_a_variant_right_on_its_first_call_and_wrong_after_it_fails_after_timing() -> None:
    def make(target):
        calls: list[int] = []

        def run(x):  # a stale cache, a graph replaying on other memory: right once, then wrong
            calls.append(1)
            return x * 2 if len(calls) == 1 else x * 2 + 0.5

        return run

    outcome = measure(tiny_case(), variant_from("stale", make))
    assert outcome.status == "failed"
    assert outcome.detail.startswith("the first call agreed with the reference, a call after ")
    assert "timed ones did not: output" in outcome.detail and outcome.extra["max_abs_error"] == 0.5
    assert outcome.timing is None
    # a variant that says it keeps state between calls (an optimizer's step count) is checked once
    stateful = measure(tiny_case(), variant_from("stateful", make, keeps_state=True))
    assert stateful.status == "ok" and stateful.timing is not None, stateful.detail


def test_a_right_variant_is_timed_and_reports_bandwidth() -> None:
    outcome = measure(tiny_case(), EAGER, Settings(device=CPU, budget_s=0.01, min_repeats=3, peak_bandwidth_gbs=100.0))
    assert outcome.status == "ok", outcome.detail
    assert outcome.timing is not None and outcome.timing.repeats >= 3
    assert outcome.bytes_moved == 64
    assert outcome.bandwidth_gbs == pytest.approx(64 / outcome.timing.median / 1e9)
    assert outcome.peak_fraction == pytest.approx(outcome.bandwidth_gbs / 100.0)
    assert outcome.kernels_per_call is None  # no kernels to count on CPU
    assert outcome.metric_values()[TIME.name] == outcome.timing.median


def test_compile_time_is_first_call_minus_steady_state_on_a_fake_clock() -> None:
    clock = FakeClock()
    calls: list[int] = []

    def make(target):
        def run(x):
            clock.advance(2.0 if not calls else 0.25)
            calls.append(1)
            return x * 2

        return run

    # every call "compiles": 7 calls (first, 2 warm-ups, 4 samples) make 6 recompilations
    variant = variant_from("slow-start", make, compilations=lambda: len(calls))
    settings = Settings(device=CPU, budget_s=2.0, min_repeats=3)
    outcome = measure(tiny_case(), variant, settings, clock=clock, timer=ScriptedTimer(clock, [0.25] * 100))
    assert outcome.status == "ok", outcome.detail
    # samples spend 0.5 s of fake time each (0.25 in the call, 0.25 in the timer): 4 fill the 2 s budget
    assert outcome.timing.repeats == 4
    assert outcome.timing.median == 0.25
    assert outcome.compile_seconds == pytest.approx(2.0 - 0.25)
    assert outcome.recompilations == 6


def test_our_compiler_reports_cache_misses_and_fusions() -> None:
    outcome = measure(tiny_case(), FUSEBENCH)
    assert outcome.status == "ok", outcome.detail
    assert outcome.recompilations == 0
    assert outcome.fusions_per_call == 0  # no fusion pass yet: the trace holds prims only


def bump(x: torch.Tensor) -> torch.Tensor:
    x.add_(1)
    return x * 1.0


def test_mutated_inputs_are_restored_before_every_call() -> None:
    seen: list[float] = []

    def spy(target):
        def run(x):
            seen.append(float(x[0]))
            return bump(x)

        return run

    case = tiny_case(fn=bump, mutated_args=(0,))
    first = measure(case, variant_from("spy", spy))
    assert first.status == "ok", first.detail
    assert len(seen) >= 1 + 2 + 3  # first call, warm-ups, repeats
    assert set(seen) == {0.0}  # every call saw the pristine input


def test_a_variant_that_does_not_mutate_a_mutated_argument_fails() -> None:
    case = tiny_case(fn=bump, mutated_args=(0,))
    outcome = measure(case, variant_from("pure", lambda target: lambda x: x + 1))
    assert outcome.status == "failed"
    assert outcome.detail.startswith("argument 0")


def test_a_variant_writing_into_an_undeclared_argument_fails() -> None:
    outcome = measure(tiny_case(), variant_from("sneaky", lambda target: lambda x: x.mul_(2)))
    assert outcome.status == "failed"
    assert "does not declare as mutated" in outcome.detail


def test_statuses_for_unsupported_skipped_unavailable_and_errors() -> None:
    def unsupported(target):
        def run(x):
            raise NotImplementedError("torch.foo is not supported\nsecond line")

        return run

    def skip(target):
        raise SkipVariant("needs a GPU")

    def boom(target):
        def run(x):
            raise RuntimeError("boom")

        return run

    case = tiny_case()
    assert (
        measure(case, variant_from("u", unsupported)).status,
        measure(case, variant_from("u", unsupported)).detail,
    ) == (
        "unsupported",
        "torch.foo is not supported",
    )
    skipped = measure(case, Variant("s", skip))
    assert (skipped.status, skipped.detail) == ("skipped", "needs a GPU")
    unavailable = measure(case, Variant("n", lambda t: Compiled(double), unavailable=lambda device: "not here"))
    assert (unavailable.status, unavailable.detail) == ("skipped", "not here")
    errored = measure(case, variant_from("e", boom))
    assert (errored.status, errored.detail) == ("error", "RuntimeError: boom")


def test_a_broken_bytes_model_is_an_error_for_every_variant() -> None:
    case = tiny_case(bytes_moved=lambda params: params["missing"])
    outcome = measure(case, EAGER)
    assert outcome.status == "error"
    assert "KeyError" in outcome.detail


def test_cold_cases_prepare_a_fresh_variant_for_every_sample() -> None:
    prepares: list[int] = []

    def make(target):
        prepares.append(1)
        return double

    settings = Settings(device=CPU, budget_s=0.0, min_repeats=1, cold_min_repeats=3)
    outcome = measure(tiny_case(cold=True, timer="wall"), variant_from("fresh", make), settings)
    assert outcome.status == "ok", outcome.detail
    assert outcome.timing.repeats == 3
    assert len(prepares) == 3  # the first call's preparation, then one per further sample
