"""The pytest-benchmark plugin: suites as benchmark tests, extra_info in the JSON, compare-fail works.

The end-to-end tests run pytest in a subprocess on the two host-overhead cases (tiny, 0.05 s per
test); the compile-once tests call `run_benchmark` with a stand-in for pytest-benchmark's fixture.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

import compiler
from fusebench.cases.case import Case, default_variants_for, format_params, variants_for
from fusebench.cases.variants import FUSEBENCH, Compiled, Target, Variant
from fusebench.integrations.pytest_plugin import PluginSettings, declares_cases, run_benchmark
from tests.support.fakes import double, tiny_case

ROOT = Path(__file__).resolve().parents[3]
SELECT = ["suites/", "-k", "one_op or twenty_ops", "--fusebench-variant", "eager,fusebench"]
SELECT += ["--fusebench-budget", "0.05"]
EXTRA_INFO = {"bandwidth_gbs", "peak_fraction", "compile_seconds", "recompilations", "kernels_per_call", "bytes_moved"}


def _pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    # NOTE: without the PYTEST_XDIST_* variables of an xdist worker running this test, which make
    # pytest-benchmark disable itself in the inner run
    inherited = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_XDIST")}
    env = {
        **inherited,
        "PYTHONPATH": str(ROOT),
        "FUSEBENCH_CACHE_DIR": str(tmp_path / "cache"),
        "PYTEST_ADDOPTS": "",
    }
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_suites_run_as_benchmarks_with_extra_info_and_compare_fail(tmp_path: Path) -> None:
    storage = f"file://{tmp_path / 'storage'}"
    first = _pytest(tmp_path, *SELECT, "--benchmark-only", "--benchmark-json", str(tmp_path / "bench.json"),
                    "--benchmark-storage", storage, "--benchmark-save", "base")  # fmt: skip
    assert first.returncode == 0, first.stdout + first.stderr
    assert "4 passed" in first.stdout
    document = json.loads((tmp_path / "bench.json").read_text())
    names = sorted(b["name"] for b in document["benchmarks"])
    expected = [f"{case}[numel=4-{variant}]" for case in ("one_op", "twenty_ops") for variant in ("eager", "fusebench")]
    assert names == expected
    fused = next(b for b in document["benchmarks"] if b["name"] == "one_op[numel=4-fusebench]")
    assert set(fused["extra_info"]) >= EXTRA_INFO
    assert fused["extra_info"]["recompilations"] == 0 and fused["extra_info"]["bandwidth_gbs"] > 0
    assert fused["extra_info"]["bandwidth_gbs"] == pytest.approx(32 / fused["stats"]["median"] / 1e9)
    assert fused["options"]["timer"] == "WallClock(cpu)" and fused["group"] == "host_overhead.one_op"

    # A saved baseline 100 times faster than reality: the next run must fail --benchmark-compare-fail.
    (saved,) = (tmp_path / "storage").rglob("0001_base.json")
    baseline = json.loads(saved.read_text())
    for bench in baseline["benchmarks"]:
        bench["stats"] = {k: v / 100 if isinstance(v, float) else v for k, v in bench["stats"].items()}
    saved.write_text(json.dumps(baseline))
    second = _pytest(tmp_path, *SELECT, "--benchmark-only", "--benchmark-storage", storage,
                     "--benchmark-compare", "0001", "--benchmark-compare-fail", "median:50%")  # fmt: skip
    assert second.returncode != 0, second.stdout
    assert "Performance has regressed" in second.stdout + second.stderr


def test_the_project_tests_never_collect_benchmarks(tmp_path: Path) -> None:
    listed = _pytest(tmp_path, "--collect-only", "-m", "not slow")
    assert listed.returncode == 0, listed.stdout[-2000:] + listed.stderr[-2000:]
    assert "suites/" not in listed.stdout.replace("tests/suites/", "")


def _collected(tmp_path: Path, *args: str) -> list[str]:
    listed = _pytest(tmp_path, "suites/llm_norms.py", "--collect-only", "--fusebench-device", "cpu", *args)
    assert listed.returncode == 0, listed.stdout[-2000:] + listed.stderr[-2000:]
    return sorted(line.split("::", 1)[1] for line in listed.stdout.splitlines() if "::" in line)


def _names(grid: Callable[[Case], list[dict]], variants: Callable[[Case], list[Variant]]) -> list[str]:
    from suites import llm_norms

    cases = llm_norms.CASES
    return sorted(f"{c.name}[{format_params(p)}-{v.name}]" for c in cases for p in grid(c) for v in variants(c))


def test_collects_what_a_default_run_measures_and_everything_with_all(tmp_path: Path) -> None:
    headline = _names(lambda c: c.headline_grid(True), default_variants_for)
    everything = _names(lambda c: c.grid(True), variants_for)
    assert _collected(tmp_path) == headline
    assert _collected(tmp_path, "--fusebench-all") == everything
    assert len(everything) > len(headline)
    # --fusebench-variant picks from every variant, over the headline parameters
    opt_in = _collected(tmp_path, "--fusebench-variant", "fusebench-torch")
    assert opt_in == _names(
        lambda c: c.headline_grid(True), lambda c: [v for v in variants_for(c) if v.name == "fusebench-torch"]
    )
    assert opt_in


def test_only_modules_that_assign_cases_are_suites(tmp_path: Path) -> None:
    (tmp_path / "real.py").write_text("CASES: list = []\n")
    (tmp_path / "string.py").write_text('TEXT = """\nCASES = [1]\n"""\n')
    (tmp_path / "broken.py").write_text("def (:\n")
    assert declares_cases(tmp_path / "real.py")
    assert not declares_cases(tmp_path / "string.py") and not declares_cases(tmp_path / "broken.py")


class FakeBenchmark:
    """pytest-benchmark's `benchmark` fixture as `run_benchmark` uses it: `pedantic` runs the rounds."""

    def __init__(self) -> None:
        self.extra_info: dict = {}
        self.rounds = 0

    def pedantic(
        self,
        target: Callable[[], object],
        setup: Callable[[], None] | None = None,
        rounds: int = 1,
        iterations: int = 1,
        warmup_rounds: int = 0,
    ) -> None:
        for _ in range(warmup_rounds + rounds):
            if setup is not None:
                setup()
            for _ in range(iterations):
                target()
        self.rounds += rounds


def _counting(variant: Variant) -> tuple[Variant, list[Compiled]]:
    prepared: list[Compiled] = []

    def prepare(target: Target) -> Compiled:
        prepared.append(variant.prepare(target))
        return prepared[-1]

    return Variant(variant.name, prepare, variant.unavailable), prepared


SETTINGS = PluginSettings(torch.device("cpu"), quick=True, variants=(), budget_s=0.01)


def test_each_variant_is_prepared_once_and_times_what_was_measured() -> None:
    calls: list[int] = []

    def make(target: Target) -> Callable[[torch.Tensor], torch.Tensor]:
        def counted(x: torch.Tensor) -> torch.Tensor:
            calls.append(1)
            return double(x)

        return counted

    variant, prepared = _counting(Variant("counted", lambda target: Compiled(make(target))))
    benchmark = FakeBenchmark()
    run_benchmark(benchmark, "s", tiny_case(), {"n": 8}, variant, SETTINGS, 10.0)
    assert len(prepared) == 1
    assert benchmark.rounds >= 5 and len(calls) > benchmark.rounds  # the measurement's calls, then the rounds'
    assert benchmark.extra_info["variant"] == "counted" and benchmark.extra_info["bandwidth_gbs"] > 0


@pytest.mark.parametrize("calls_per_sample", [1, 4])
def test_our_compiler_compiles_once_per_benchmark(calls_per_sample: int) -> None:
    variant, prepared = _counting(FUSEBENCH)
    benchmark = FakeBenchmark()
    case = tiny_case(calls_per_sample=calls_per_sample)
    run_benchmark(benchmark, "s", case, {"n": 8}, variant, SETTINGS, 10.0)
    assert len(prepared) == 1
    stats = compiler.cache_stats(prepared[0].program)
    assert stats.misses == 1 and stats.hits > benchmark.rounds
    assert benchmark.extra_info["recompilations"] == 0


def test_a_cold_case_prepares_afresh_for_every_round() -> None:
    variant, prepared = _counting(FUSEBENCH)
    benchmark = FakeBenchmark()
    run_benchmark(benchmark, "s", tiny_case(cold=True), {"n": 8}, variant, SETTINGS, 10.0)
    measured = len(prepared) - (benchmark.rounds + 1)  # each round and the warm-up prepare once
    assert measured >= 3  # the measurement's own: the first call's and at least two cold samples
