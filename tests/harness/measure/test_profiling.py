"""Kernel counting: the CUPTI teardown is set up before any profiler of the process runs."""

from __future__ import annotations

import os
import subprocess
import sys

import torch

from fusebench.measure.profiling import count_kernels


def _teardown_after_import(env: dict[str, str]) -> str:
    code = "import os, fusebench.measure.profiling; print(os.environ.get('TEARDOWN_CUPTI'))"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_importing_the_profiling_module_sets_cupti_teardown_unless_the_user_chose() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TEARDOWN_CUPTI"}
    assert _teardown_after_import(env) == "1"
    assert _teardown_after_import({**env, "TEARDOWN_CUPTI": "0"}) == "0"


def test_there_are_no_kernels_to_count_on_cpu() -> None:
    assert count_kernels(lambda: torch.ones(3) + 1, torch.device("cpu")) is None
