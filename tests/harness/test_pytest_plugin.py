"""The pytest-benchmark plugin: suites as benchmark tests, extra_info in the JSON, compare-fail works.

Each test runs pytest in a subprocess on the two host-overhead cases (tiny, 0.05 s per test).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fusebench.integrations.pytest_plugin import declares_cases

ROOT = Path(__file__).resolve().parents[2]
SELECT = ["suites/", "-k", "one_op or twenty_ops", "--fusebench-variant", "eager,fusebench"]
SELECT += ["--fusebench-budget", "0.05"]
EXTRA_INFO = {"bandwidth_gbs", "peak_fraction", "compile_seconds", "recompilations", "kernels_per_call", "bytes_moved"}


def _pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
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


def test_only_modules_that_assign_cases_are_suites(tmp_path: Path) -> None:
    (tmp_path / "real.py").write_text("CASES: list = []\n")
    (tmp_path / "string.py").write_text('TEXT = """\nCASES = [1]\n"""\n')
    (tmp_path / "broken.py").write_text("def (:\n")
    assert declares_cases(tmp_path / "real.py")
    assert not declares_cases(tmp_path / "string.py") and not declares_cases(tmp_path / "broken.py")
