"""torch's thread count while measuring: 1 by default, $OMP_NUM_THREADS or --threads otherwise; recorded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fusebench.errors import FusebenchError
from fusebench.measure.machine import machine_info
from fusebench.measure.threads import checked_threads


def test_the_default_is_one_thread_unless_the_environment_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert checked_threads(None) == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert checked_threads(None) == 3 and checked_threads(2) == 2
    monkeypatch.setenv("OMP_NUM_THREADS", "lots")
    assert checked_threads(None) == 1
    with pytest.raises(FusebenchError, match="--threads 0: expected a whole number of threads from 1 to 1024"):
        checked_threads(0)


def test_the_machine_facts_record_the_thread_count() -> None:
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert machine_info("m").as_json()["threads"] == "1"
    finally:
        torch.set_num_threads(before)


SUITE = """
import torch

from fusebench.cases import Case

CASES = [
    Case(
        name="double",
        fn=lambda x: x * 2,
        make_inputs=lambda params, device, seed: (torch.ones(params["n"], device=device),),
        bytes_moved=lambda params: 8 * params["n"],
        params={"n": [64]},
    )
]
"""


@pytest.mark.slow
def test_a_run_measures_with_the_threads_asked_and_says_how_quiet_the_machine_was(tmp_path: Path) -> None:
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "tiny.py").write_text(SUITE)
    root = Path(__file__).resolve().parents[3]
    command = [sys.executable, "-m", "fusebench", "run", "--suites", str(tmp_path / "suites"), "--variant", "eager"]
    command += ["--device", "cpu", "--quick", "--repeat-budget", "0.01", "--threads", "2"]
    command += ["--json", str(tmp_path / "run.json"), "--results", str(tmp_path / "results")]
    env = {**os.environ, "PYTHONPATH": str(root), "FUSEBENCH_CACHE_DIR": str(tmp_path / "cache")}
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "run.json").read_text())["machine"]["threads"] == "2"
    assert "1 control (eager) rows spread" in result.stdout
    [machine_json] = (tmp_path / "results").glob("*/machine.json")
    assert json.loads(machine_json.read_text())["threads"] == "2"
