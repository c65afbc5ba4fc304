"""Shared test configuration: GPU tests are skipped with a reason when CUDA or nvFuser is missing."""

from __future__ import annotations

import importlib.util
import os

import pytest
import torch

import compiler
import fusebench.measure.profiling  # noqa: F401  (sets TEARDOWN_CUPTI before any test's profiler runs)
from compiler.executors import CPU_EXECUTORS_ENV
from compiler.executors.nvfuser.run.kernel_db import KERNEL_DB_ENV

# NOTE: where nvFuser cannot run, `jit`'s default executors would compile every region with
# Inductor (seconds each on CPU); the suite's thousands of CPU calls test the torch executor
# instead, and the tests of Inductor name it. Set before any test (and inherited by the
# `fusebench` processes tests start); a value already in the environment wins.
os.environ.setdefault(CPU_EXECUTORS_ENV, "torch")


def _nvfuser_missing_reason() -> str | None:
    if not torch.cuda.is_available():
        return "needs CUDA: torch.cuda.is_available() is False on this machine"
    if importlib.util.find_spec("nvfuser_direct") is None:
        return "needs nvFuser: the nvfuser_direct module is not installed"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skips `gpu` tests without CUDA, and `nvfuser` tests without CUDA or nvFuser, saying why."""
    no_cuda = None if torch.cuda.is_available() else "needs CUDA: torch.cuda.is_available() is False"
    no_nvfuser = _nvfuser_missing_reason()
    for item in items:
        # NOTE: markers, not item.keywords: keywords also hold parent folder names (a checkout in
        # a folder named "nvfuser" would otherwise skip every test).
        if item.get_closest_marker("nvfuser") and no_nvfuser:
            item.add_marker(pytest.mark.skip(reason=no_nvfuser))
        elif item.get_closest_marker("gpu") and no_cuda:
            item.add_marker(pytest.mark.skip(reason=no_cuda))


@pytest.fixture(autouse=True, scope="session")
def _kernel_db_in_a_temporary_directory(tmp_path_factory: pytest.TempPathFactory) -> None:
    """nvFuser's on-disk kernels (executors/nvfuser/run/kernel_db.py) go to this session's temporary
    directory, not the user's cache, unless the environment already says where (or off)."""
    os.environ.setdefault(KERNEL_DB_ENV, str(tmp_path_factory.mktemp("nvfuser_kernel_db")))


@pytest.fixture(autouse=True)
def _fresh_fusion_cache() -> None:
    """Each test starts without nvFuser definitions shared from an earlier test (their counts and
    compilations are part of what tests check)."""
    compiler.clear_fusion_cache()
