"""Peak bandwidth: measured with a copy, cached on disk per machine and device."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from fusebench.measure import bandwidth

CPU = torch.device("cpu")


def test_the_copy_bandwidth_is_positive_and_plausible() -> None:
    gbs = bandwidth.measure_copy_bandwidth(CPU, nbytes=8 << 20, repeats=3)
    assert 0.1 < gbs < 10_000


def test_peak_is_measured_once_then_read_from_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUSEBENCH_CACHE_DIR", str(tmp_path))
    measured: list[torch.device] = []

    def fake_measure(device: torch.device, nbytes: int | None = None, repeats: int = 10) -> float:
        measured.append(device)
        return 123.0

    monkeypatch.setattr(bandwidth, "measure_copy_bandwidth", fake_measure)
    assert bandwidth.peak_bandwidth_gbs(CPU) == 123.0
    assert bandwidth.peak_bandwidth_gbs(CPU) == 123.0
    assert len(measured) == 1
    cached = json.loads((tmp_path / "peak_bandwidth.json").read_text())
    assert cached == {bandwidth.device_key(CPU): 123.0}
    assert bandwidth.peak_bandwidth_gbs(CPU, remeasure=True) == 123.0
    assert len(measured) == 2


def test_a_damaged_cache_is_remeasured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUSEBENCH_CACHE_DIR", str(tmp_path))
    (tmp_path / "peak_bandwidth.json").write_text("{not json")
    monkeypatch.setattr(bandwidth, "measure_copy_bandwidth", lambda device, nbytes=None, repeats=10: 7.5)
    assert bandwidth.peak_bandwidth_gbs(CPU) == 7.5
    assert json.loads((tmp_path / "peak_bandwidth.json").read_text()) == {bandwidth.device_key(CPU): 7.5}
