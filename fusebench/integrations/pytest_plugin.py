"""pytest-benchmark over fusebench suites: each (case, parameters, variant) is one benchmark test.

    pytest suites/ --benchmark-only                        # suites/conftest.py loads this plugin
    pytest -p fusebench.integrations.pytest_plugin my_suites/ --benchmark-only --benchmark-json out.json

A Python file is collected when it assigns `CASES` at top level (test files, conftest.py and
`_private.py` files are left to pytest). Each test is named `<case>[<params>-<variant>]`, so `-k`
selects cases, parameters and variants. It first runs fusebench's own measurement
(`measure_variant`, with a small budget): the result must match the reference (else the test
fails with the max error), a variant that cannot run here or does not support the case is
skipped with the reason. Then pytest-benchmark times the very function that measurement compiled
(each variant compiles once per test; a `cold` case prepares it afresh every round) with
`fusebench.measure.clocks`: device time from CUDA events for cases with the device timer, synchronized
wall time for the others; inputs the case mutates are restored and the GPU's L2 cache flushed
before every round, outside the timed region. `benchmark.extra_info` gets the bandwidth (from
pytest-benchmark's median), its fraction of the machine's peak, compile time, recompilations,
kernels and fusions per call, so `--benchmark-json` records them and `--benchmark-compare-fail`
guards the times.

What is collected is what `fusebench run` measures by default: each case's headline parameters
(`Case.headline_grid`) with its default variants (`default_variants_for`); --fusebench-all collects
every parameter combination with every variant, and --fusebench-variant picks variants from all of
a case's variants (as `fusebench run --variant` does).

Options: --fusebench-device cpu|cuda (default: cuda when available), --fusebench-full (GPU sizes;
default on CUDA), --fusebench-all (every combination), --fusebench-variant NAME (names or globs,
repeatable or comma-separated), --fusebench-budget S (seconds of timed rounds per test; default 0.2
on CPU, 1 on CUDA).
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from fusebench.cases.case import Case, format_params
from fusebench.cases.discovery import suite_from_module
from fusebench.cases.selection import selected_variants
from fusebench.cases.variants import Compiled, Target, Variant
from fusebench.measure.bandwidth import peak_bandwidth_gbs
from fusebench.measure.clocks import clock_for
from fusebench.measure.measure import Settings, measure_variant, prepare_case
from fusebench.measure.outcome import Outcome
from fusebench.measure.timing import L2Flusher

DEFAULT_BUDGET_S = {"cpu": 0.2, "cuda": 1.0}
CHECK_BUDGET_S = 0.02
MIN_ROUNDS, MAX_ROUNDS = 5, 100_000


@dataclass(frozen=True)
class PluginSettings:
    """The resolved --fusebench-* options."""

    device: torch.device
    quick: bool
    variants: tuple[str, ...]
    budget_s: float
    everything: bool = False


def pytest_addoption(parser: pytest.Parser) -> None:
    """Adds the --fusebench-* options."""
    group = parser.getgroup("fusebench", "fusebench suites as pytest-benchmark tests")
    group.addoption("--fusebench-device", choices=["cpu", "cuda"], help="default: cuda when available")
    group.addoption("--fusebench-full", action="store_true", help="GPU sizes (default on CUDA; quick sizes on CPU)")
    group.addoption(
        "--fusebench-all", action="store_true", help="every parameter combination and variant (default: headlines)"
    )
    group.addoption("--fusebench-variant", action="append", default=[], metavar="NAME", help="only these variants")
    group.addoption("--fusebench-budget", type=float, metavar="S", help="seconds of timed rounds per test")


def plugin_settings(config: pytest.Config) -> PluginSettings:
    """The options, with defaults resolved for this machine."""
    device = config.getoption("fusebench_device") or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise pytest.UsageError("--fusebench-device cuda: torch.cuda.is_available() is False on this machine")
    budget = config.getoption("fusebench_budget") or DEFAULT_BUDGET_S[device]
    if budget <= 0:
        raise pytest.UsageError(f"--fusebench-budget {budget}: expected a positive number of seconds")
    variants = tuple(v.strip() for value in config.getoption("fusebench_variant") for v in value.split(",") if v)
    quick = not config.getoption("fusebench_full") and device == "cpu"
    everything = bool(config.getoption("fusebench_all"))
    return PluginSettings(torch.device(device), quick, variants, budget, everything)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """Collects suite modules (files that assign CASES at top level)."""
    if file_path.suffix != ".py" or file_path.name == "conftest.py" or file_path.name.startswith(("_", "test_")):
        return None
    if not declares_cases(file_path):
        return None
    return SuiteModule.from_parent(parent, path=file_path)


def declares_cases(path: Path) -> bool:
    """Whether the module at `path` assigns `CASES` at top level (read, not imported)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    except (OSError, SyntaxError, ValueError):
        return False
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == "CASES" for t in targets):
            return True
    return False


@pytest.fixture(scope="session")
def fusebench_settings(request: pytest.FixtureRequest) -> PluginSettings:
    """The plugin's settings for this session."""
    return plugin_settings(request.config)


@pytest.fixture(scope="session")
def fusebench_peak_bandwidth(fusebench_settings: PluginSettings) -> float:
    """The machine's peak bandwidth (GB/s), measured once and cached (see fusebench.measure.bandwidth)."""
    return peak_bandwidth_gbs(fusebench_settings.device)


class SuiteModule(pytest.Module):
    """A suite module; its items are the (case, params, variant) benchmarks of the selected grid."""

    def collect(self) -> Iterator[pytest.Item]:
        settings = plugin_settings(self.config)
        suite = suite_from_module(self.path.stem, self.obj)
        assert suite is not None
        for case in suite.cases:
            variants = selected_variants(case, settings.variants, settings.everything)
            clock = clock_for(case.timer, settings.device)
            grid = case.grid(settings.quick) if settings.everything else case.headline_grid(settings.quick)
            for params in grid:
                for variant in variants:
                    name = f"{case.name}[{format_params(params)}-{variant.name}]"
                    test = _benchmark_test(suite.name, case, params, variant)
                    item = pytest.Function.from_parent(self, name=name, callobj=test)
                    item.add_marker(pytest.mark.benchmark(group=f"{suite.name}.{case.name}", timer=clock))
                    yield item


def _benchmark_test(suite: str, case: Case, params: dict[str, Any], variant: Variant) -> Callable[..., None]:
    def test(benchmark: Any, fusebench_settings: PluginSettings, fusebench_peak_bandwidth: float) -> None:
        run_benchmark(benchmark, suite, case, params, variant, fusebench_settings, fusebench_peak_bandwidth)

    test.__doc__ = f"{suite}.{case.name}({format_params(params)}) with {variant.name}"
    return test


def run_benchmark(
    benchmark: Any,
    suite: str,
    case: Case,
    params: dict[str, Any],
    variant: Variant,
    settings: PluginSettings,
    peak_gbs: float,
) -> None:
    """Checks and measures with fusebench, then times with pytest-benchmark; fills extra_info."""
    reason = variant.unavailable(settings.device)
    if reason is not None:
        pytest.skip(f"{variant.name}: {reason}")
    check_settings = Settings(device=settings.device, budget_s=CHECK_BUDGET_S, peak_bandwidth_gbs=peak_gbs)
    prepared = prepare_case(suite, case, params, check_settings)
    remembered, compiled = remembering(variant)
    outcome = measure_variant(prepared, remembered, check_settings)
    if outcome.status in ("skipped", "unsupported"):
        pytest.skip(f"{outcome.status}: {outcome.detail}")
    if outcome.status != "ok":
        pytest.fail(f"{variant.name} {outcome.status}: {outcome.detail}", pytrace=False)
    assert outcome.timing is not None and prepared.snapshot is not None and compiled
    snapshot, args = prepared.snapshot, prepared.args
    target = Target(case.fn, args, params, case.options(params), settings.device)
    flusher = L2Flusher(settings.device)

    def before_each() -> None:
        snapshot.restore_mutated()
        if case.cold:
            compiled[0] = variant.prepare(target)
        flusher.flush()

    round_s = max(outcome.timing.median * case.calls_per_sample, 1e-9)
    rounds = int(min(max(settings.budget_s / round_s, MIN_ROUNDS), 20 if case.cold else MAX_ROUNDS))
    if case.calls_per_sample > 1:
        # NOTE: calls too short to time one by one: pytest-benchmark divides by the iterations
        benchmark.pedantic(
            lambda: case.run(compiled[0].fn, args),
            rounds=rounds,
            iterations=case.calls_per_sample,
            warmup_rounds=1,
        )
    else:
        benchmark.pedantic(lambda: case.run(compiled[0].fn, args), setup=before_each, rounds=rounds, warmup_rounds=1)
    snapshot.restore_all()
    benchmark.extra_info.update(extra_info(outcome, _median(benchmark)))


def remembering(variant: Variant) -> tuple[Variant, list[Compiled]]:
    """`variant` with a `prepare` that also keeps what it prepared, and the list it keeps it in
    (its one item: the latest preparation), so the benchmark rounds reuse the measured function."""
    latest: list[Compiled] = []

    def prepare(target: Target) -> Compiled:
        latest[:] = [variant.prepare(target)]
        return latest[0]

    return dataclasses.replace(variant, prepare=prepare), latest


def extra_info(outcome: Outcome, median_s: float | None) -> dict[str, Any]:
    """What pytest-benchmark's JSON should carry besides the times: bandwidth, compile time, counters."""
    median = median_s if median_s else (outcome.timing.median if outcome.timing else None)
    bandwidth = outcome.bytes_moved / median / 1e9 if median and outcome.bytes_moved is not None else None
    peak = outcome.peak_bandwidth_gbs
    return {
        "suite": outcome.suite,
        "case": outcome.case,
        "params": format_params(outcome.params),
        "variant": outcome.variant,
        "device": outcome.device,
        "bytes_moved": outcome.bytes_moved,
        "bandwidth_gbs": bandwidth,
        "peak_bandwidth_gbs": peak,
        "peak_fraction": bandwidth / peak if bandwidth is not None and peak else None,
        "compile_seconds": outcome.compile_seconds,
        "recompilations": outcome.recompilations,
        "kernels_per_call": outcome.kernels_per_call,
        "fusions_per_call": outcome.fusions_per_call,
        "kernels_backward": outcome.kernels_backward,
        "fusions_backward": outcome.fusions_backward,
    }


def _median(benchmark: Any) -> float | None:
    stats = getattr(getattr(benchmark, "stats", None), "stats", None)
    return float(stats.median) if stats is not None and getattr(stats, "data", None) else None
