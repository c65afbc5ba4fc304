"""A CPU smoke run of scripts/nvfuser_acceptance.py against the fake nvfuser_direct: catches
mistakes in the script's GPU-only code paths here. Timings and kernel lists are stubbed; the
numbers the script prints on a GPU are not checked here."""

from __future__ import annotations

import sys

import pytest
import torch

from compiler import examine
from compiler.executors.nvfuser.diagnose import fake_nvfuser
from scripts import nvfuser_acceptance
from tests.support.nvfuser_helpers import fake_nvfuser as fake_backend  # noqa: F401 - a fixture


@pytest.fixture
def cpu_script(monkeypatch, fake_backend):  # noqa: F811
    monkeypatch.setitem(sys.modules, "nvfuser_direct", fake_backend)
    # segments() profiles each fusion's repro script in a child process, which needs the real
    # nvfuser_direct; here one stubbed kernel per fusion stands in for that profile.
    kernel = examine.KernelInfo(0, "pointwise", 0.01, 100.0, "nvfuser_pointwise_f0", "grid [1] block [1]")
    monkeypatch.setattr(examine, "_profile_all", lambda fusions: [examine.Profile([kernel], "")] * len(fusions))
    monkeypatch.setattr(nvfuser_acceptance, "unavailable_reason", lambda: None)
    monkeypatch.setattr(nvfuser_acceptance, "DEVICE", "cpu")
    monkeypatch.setattr(nvfuser_acceptance, "median_ms", lambda fn, repeats=30: (fn(), 0.5)[1])
    monkeypatch.setattr(nvfuser_acceptance, "cuda_kernels", lambda fn: (fn(), ["nvfuser_pointwise_f0"])[1])
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=0: "fake")
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)


def test_the_acceptance_script_runs_end_to_end(cpu_script, capsys):
    assert nvfuser_acceptance.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "nvfuser_direct fake" in out
    assert "[gelu] ratio jitted / hand-written = 1.000" in out and "fusions=1" in out
    assert "[split3] 20 split sizes" in out and "traces=1" in out and "FusionDefinitions=1" in out
    assert "[adam]" in out and "done in" in out


def test_the_fake_is_only_a_test_double():
    assert fake_nvfuser.module().version() == "fake"
