"""ASV adapters: every case of a suite module, seen by `asv run` as a class of benchmarks.

A suite module ends with

    globals().update(asv_benchmarks(__name__, CASES))

which adds one class per case, named after the case, to the module. ASV discovers it (benchmark_dir
is `suites`) and names its benchmarks `<suite>.<case>.<metric>`, with the case's parameters plus
`variant` as parameters and `outcome.benchmark_version(case.version)` as version: exactly the
benchmarks `fusebench run` records, so `asv run` and `fusebench run` write one history and
`asv publish` shows both.

- `time_call` is timed by ASV with `fusebench.measure.clocks`: device time (CUDA events) for cases with
  the device timer, synchronized wall time for the others. Its own setup makes the inputs,
  compiles the variant and checks the first result against the reference (a wrong result fails
  the benchmark), so ASV never times a compilation. ASV calls it back to back: a case that
  updates its inputs in place is timed without restoring them between calls (the same work
  on drifting values); a `cold` case compiles afresh inside every timed call.
- `track_compile_seconds`, `track_recompilations`, `track_bandwidth_gbs` (GB/s),
  `track_peak_fraction`, `track_kernels_per_call`, `track_fusions_per_call`,
  `track_kernels_backward`, `track_fusions_backward` (training steps), `track_peak_device_bytes`
  and `track_peak_host_rss_bytes` (the measurement's peak memory, unit "bytes": ASV's own
  `peakmem_` would measure the lifetime RSS of its process, setup and imports included): each runs
  `fusebench.measure.measure_variant` in its setup (ASV runs every benchmark and parameter
  combination in a fresh process with `launch_method: spawn`, so compile time is a cold
  process's) and returns one of its metrics, with the metric's unit.

A combination ASV should not run raises NotImplementedError in setup, which ASV records as
skipped: parameter values outside the selected grid (both the full and the quick values are
parameters, so results of both sizes share one benchmark), a variant that cannot run here, a
metric that does not apply (kernels on CPU). Environment variables choose the rest:
FUSEBENCH_ASV_DEVICE (cpu|cuda; default cuda when available), FUSEBENCH_ASV_SIZES (quick|full;
default quick on CPU, full on CUDA), FUSEBENCH_ASV_BUDGET (seconds of timed repeats of the track
measurements; default 0.05 on CPU, 0.5 on CUDA), FUSEBENCH_ASV_ALL (1: every combination and
variant, as `fusebench run --all`; by default the ones a default `fusebench run` measures, each
case's headline combinations with the default variants, so that a bare `asv run` costs what a
default `fusebench run` does and the two record the same benchmarks; the others are skipped with
a reason naming the variable).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from fusebench.cases.case import Case, default_variants_for, format_params, variants_for
from fusebench.cases.variants import SkipVariant, Target, Variant
from fusebench.errors import check
from fusebench.measure.bandwidth import peak_bandwidth_gbs
from fusebench.measure.clocks import clock_for
from fusebench.measure.measure import PreparedCase, Settings, check_result, measure_variant, prepare_case
from fusebench.measure.outcome import METRICS, TIME, Metric, Outcome, benchmark_version

DEFAULT_BUDGET_S = {"cpu": 0.05, "cuda": 0.5}
TIMEOUT_S = 600.0


@dataclass(frozen=True)
class AsvSettings:
    """What the adapters measure on: the device, the grid (quick or full) and the track budget."""

    device: torch.device
    quick: bool
    budget_s: float
    everything: bool = False


def asv_settings(environ: Mapping[str, str] = os.environ) -> AsvSettings:
    """Reads FUSEBENCH_ASV_DEVICE, FUSEBENCH_ASV_SIZES, FUSEBENCH_ASV_BUDGET and FUSEBENCH_ASV_ALL
    (see the module doc)."""
    device = environ.get("FUSEBENCH_ASV_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    check(device in ("cpu", "cuda"), lambda: f"FUSEBENCH_ASV_DEVICE={device!r}: expected 'cpu' or 'cuda'")
    sizes = environ.get("FUSEBENCH_ASV_SIZES") or ("quick" if device == "cpu" else "full")
    check(sizes in ("quick", "full"), lambda: f"FUSEBENCH_ASV_SIZES={sizes!r}: expected 'quick' or 'full'")
    budget_text = environ.get("FUSEBENCH_ASV_BUDGET") or str(DEFAULT_BUDGET_S[device])
    try:
        budget = float(budget_text)
    except ValueError:
        budget = -1.0
    check(budget > 0, lambda: f"FUSEBENCH_ASV_BUDGET={budget_text!r}: expected a positive number of seconds")
    everything = environ.get("FUSEBENCH_ASV_ALL") or "0"
    check(everything in ("0", "1"), lambda: f"FUSEBENCH_ASV_ALL={everything!r}: expected '1' (everything) or '0'")
    return AsvSettings(torch.device(device), sizes == "quick", budget, everything == "1")


def parameter_axes(case: Case) -> list[list[Any]]:
    """ASV's `params`: per parameter the full values then the quick values not among them, then variants."""
    axes = []
    for name in case.param_names:
        values = list(case.params[name])
        for value in (case.quick_params or {}).get(name, []):
            if repr(value) not in {repr(v) for v in values}:
                values.append(value)
        axes.append(values)
    return [*axes, [variant.name for variant in variants_for(case)]]


def asv_benchmarks(module_name: str, cases: Sequence[Case]) -> dict[str, type]:
    """One ASV benchmark class per case, keyed by the module attribute to bind it to ('asv_<case>')."""
    suite = module_name.rsplit(".", 1)[-1]
    settings = asv_settings()
    return {f"asv_{case.name}": benchmark_class(suite, module_name, case, settings) for case in cases}


def benchmark_class(suite: str, module_name: str, case: Case, settings: AsvSettings) -> type:
    """The ASV benchmark class of `case`: `time_call` plus one `track_*` method per other metric."""
    state = _CaseState(suite, case, settings)

    def setup(self: Any, *values: Any) -> None:
        state.check_selected(values)

    def time_call(self: Any, *values: Any) -> None:
        state.calls[values]()

    time_call.setup = state.prepare_timing  # type: ignore[attr-defined]
    time_call.timer = clock_for(case.timer, settings.device)  # type: ignore[attr-defined]
    time_call.number = 1 if case.cold else 0  # type: ignore[attr-defined]
    namespace: dict[str, Any] = {
        "params": parameter_axes(case),
        "param_names": [*case.param_names, "variant"],
        "version": benchmark_version(case.version),
        "timeout": TIMEOUT_S,
        "setup": setup,
        TIME.name: time_call,
    }
    for metric in METRICS:
        if metric is not TIME:
            namespace[metric.name] = _track(state, metric)
    cls = type(case.name, (), namespace)
    cls.__module__ = module_name
    cls.__doc__ = f"ASV benchmarks of {suite}.{case.name}: {case.description or case.name}"
    return cls


def _track(state: _CaseState, metric: Metric) -> Callable[..., Any]:
    def track(self: Any, *values: Any) -> float | int | None:
        return state.outcomes[values].metric_values()[metric.name]

    track.__name__ = track.__qualname__ = metric.name
    track.setup = lambda *values: state.measure(values, metric)  # type: ignore[attr-defined]
    track.unit = metric.unit  # type: ignore[attr-defined]
    return track


class _CaseState:
    """What one ASV process prepared for a case, per parameter combination (values tuple)."""

    def __init__(self, suite: str, case: Case, settings: AsvSettings) -> None:
        self.suite = suite
        self.case = case
        self.settings = settings
        self.variants: dict[str, Variant] = {v.name: v for v in variants_for(case)}
        self.calls: dict[tuple, Callable[[], Any]] = {}
        self.restores: dict[tuple, Callable[[], None]] = {}
        self.outcomes: dict[tuple, Outcome] = {}

    def split(self, values: tuple) -> tuple[dict[str, Any], Variant]:
        """(case parameters, variant) of one ASV parameter combination."""
        *param_values, variant_name = values
        return dict(zip(self.case.param_names, param_values)), self.variants[variant_name]

    def check_selected(self, values: tuple) -> None:
        """Raises NotImplementedError (ASV: skipped) for combinations not measured here."""
        params, variant = self.split(values)
        sizes = "quick" if self.settings.quick else "full"
        if params not in self.case.grid(self.settings.quick):
            raise NotImplementedError(f"{format_params(params)} is not in the {sizes} grid (FUSEBENCH_ASV_SIZES)")
        if not self.settings.everything:
            if params not in self.case.headline_grid(self.settings.quick):
                raise NotImplementedError(
                    f"{format_params(params)} is not in the case's headline (FUSEBENCH_ASV_ALL=1 measures every one)"
                )
            if variant not in default_variants_for(self.case):
                raise NotImplementedError(
                    f"{variant.name} is not a default variant (FUSEBENCH_ASV_ALL=1 measures every one)"
                )
        reason = variant.unavailable(self.settings.device)
        if reason is not None:
            raise NotImplementedError(f"{variant.name} cannot run here: {reason}")

    def prepare_timing(self, *values: Any) -> None:
        """Compiles the variant and checks its first result; `calls[values]` is then one timed call.

        ASV runs this setup again before every timed call (asv#966); after the first it only
        restores the inputs the case updates in place, so a step timed 1000 times always starts
        from the same state (an Adam step does not drift towards NaN or denormals)."""
        if values in self.restores:
            self.restores[values]()
            return
        params, variant = self.split(values)
        prepared = self._prepare(params, Settings(device=self.settings.device))
        target = Target(self.case.fn, prepared.args, params, self.case.options(params), self.settings.device)
        try:
            compiled = variant.prepare(target)
            problem = check_result(prepared, self.case.run(compiled.fn, prepared.args))
        except SkipVariant as error:
            raise NotImplementedError(f"skipped: {error}") from error
        if problem is not None:
            raise AssertionError(f"{variant.name} disagrees with the reference: {problem[0]}")
        assert prepared.snapshot is not None
        prepared.snapshot.restore_all()
        self.restores[values] = prepared.snapshot.restore_mutated
        run, args = self.case.run, prepared.args
        if self.case.cold:
            self.calls[values] = lambda: run(variant.prepare(target).fn, args)
        else:
            self.calls[values] = lambda: run(compiled.fn, args)

    def measure(self, values: tuple, metric: Metric) -> None:
        """Runs fusebench's measurement once per combination; skips metrics it has no value for."""
        if values not in self.outcomes:
            params, variant = self.split(values)
            device = self.settings.device
            peak = peak_bandwidth_gbs(device)
            settings = Settings(device=device, budget_s=self.settings.budget_s, peak_bandwidth_gbs=peak)
            self.outcomes[values] = measure_variant(self._prepare(params, settings), variant, settings)
        outcome = self.outcomes[values]
        if outcome.status in ("skipped", "unsupported"):
            raise NotImplementedError(f"{outcome.status}: {outcome.detail}")
        if outcome.status != "ok":
            raise AssertionError(f"{outcome.variant} {outcome.status}: {outcome.detail}")
        if outcome.metric_values()[metric.name] is None:
            raise NotImplementedError(f"{metric.name} is not measured for {outcome.variant} on {outcome.device}")

    def _prepare(self, params: dict[str, Any], settings: Settings) -> PreparedCase:
        prepared = prepare_case(self.suite, self.case, params, settings)
        if prepared.error is not None:
            raise AssertionError(prepared.error)
        return prepared
