"""Peak memory per measurement: each measurement's own peak, not the process's lifetime maximum."""

from __future__ import annotations

import gc

import pytest
import torch

from fusebench.measure.measure import Settings, measure_variant, prepare_case
from fusebench.measure.memory import CLEAR_REFS, MemoryWatch, high_water_mark_bytes
from fusebench.measure.outcome import PEAK_DEVICE, PEAK_HOST_RSS
from tests.support.fakes import tiny_case, variant_from

CPU = torch.device("cpu")
MIB = 1 << 20

linux_only = pytest.mark.skipif(high_water_mark_bytes() is None, reason="needs /proc/self/status (Linux)")


def touch(megabytes: int) -> None:
    """Allocates and writes `megabytes` MiB (so they are resident), then frees them."""
    block = torch.ones(megabytes * MIB // 4)
    del block


@linux_only
def test_each_interval_reports_its_own_host_peak_not_an_earlier_one() -> None:
    watch = MemoryWatch(CPU)
    watch.start()
    touch(256)
    big = watch.stop()
    watch.start()
    touch(16)
    small = watch.stop()
    assert big.device_bytes is None and small.device_bytes is None  # CPU: no device memory
    assert big.host_rss_bytes is not None and small.host_rss_bytes is not None
    assert big.host_rss_bytes - small.host_rss_bytes > 128 * MIB  # the 256 MiB peak is not the second's


@linux_only
def test_without_a_resettable_mark_a_peak_below_the_lifetime_maximum_is_unknown(monkeypatch) -> None:
    monkeypatch.setattr("fusebench.measure.memory.CLEAR_REFS", CLEAR_REFS.parent / "no-such-file" / "x")
    watch = MemoryWatch(CPU)
    touch(256)
    watch.start()
    touch(8)
    assert watch.stop().host_rss_bytes is None


@linux_only
def test_a_measurement_records_the_peak_rss_of_the_variant_as_a_metric() -> None:
    def make(target):
        def run(x):
            touch(192)
            return x * 2

        return run

    settings = Settings(device=CPU, budget_s=0.01, min_repeats=3)
    case = tiny_case()
    prepared = prepare_case("tiny", case, case.grid(quick=True)[0], settings)
    hungry = measure_variant(prepared, variant_from("hungry", make), settings)
    light = measure_variant(prepared, variant_from("light", lambda target: lambda x: x * 2), settings)
    assert hungry.status == "ok" and light.status == "ok", (hungry.detail, light.detail)
    assert hungry.peak_host_rss_bytes - light.peak_host_rss_bytes > 96 * MIB
    values = hungry.metric_values()
    assert values[PEAK_HOST_RSS.name] == hungry.peak_host_rss_bytes
    assert values[PEAK_DEVICE.name] is None  # CPU
    assert PEAK_HOST_RSS.unit == "bytes" and PEAK_HOST_RSS.kind == "track"


@pytest.mark.gpu
def test_device_peak_is_the_measurements_own_allocation_above_its_start() -> None:
    device = torch.device("cuda")
    resident = torch.empty(64 * MIB, dtype=torch.uint8, device=device)  # allocated before: not counted
    watch = MemoryWatch(device)
    watch.start()
    block = torch.empty(32 * MIB, dtype=torch.uint8, device=device)
    del block
    peak = watch.stop()
    assert peak.device_bytes == 32 * MIB
    del resident


class _Cycle:
    """An object that refers to itself: unreachable, it is freed only by the garbage collector."""

    def __init__(self, block: torch.Tensor) -> None:
        self.me, self.block = self, block


@pytest.mark.gpu
def test_garbage_an_earlier_measurement_left_does_not_hide_this_ones_peak() -> None:
    device = torch.device("cuda")
    _Cycle(torch.empty(64 * MIB, dtype=torch.uint8, device=device))  # an earlier variant's model, say
    watch = MemoryWatch(device)
    watch.start()
    gc.collect()  # the interpreter collects when it will: here, before the measurement allocates
    block = torch.empty(32 * MIB, dtype=torch.uint8, device=device)
    del block
    assert watch.stop().device_bytes == 32 * MIB


@pytest.mark.gpu
def test_a_cuda_measurement_records_what_the_variant_allocated() -> None:
    def make(target):
        def run(x):
            scratch = torch.empty(64 * MIB, dtype=torch.uint8, device=x.device)
            del scratch
            return x * 2

        return run

    device = torch.device("cuda")
    settings = Settings(device=device, budget_s=0.01, min_repeats=3)
    case = tiny_case()
    prepared = prepare_case("tiny", case, case.grid(quick=True)[0], settings)
    hungry = measure_variant(prepared, variant_from("hungry", make), settings)
    light = measure_variant(prepared, variant_from("light", lambda target: lambda x: x * 2), settings)
    assert hungry.status == "ok" and light.status == "ok", (hungry.detail, light.detail)
    # NOTE: the scratch block is freed before the output is made, so the peaks do not add up: the
    # hungry peak holds the block, the light one only small tensors.
    assert 64 * MIB <= hungry.peak_device_bytes < 65 * MIB
    assert light.peak_device_bytes < MIB  # a few small tensors: output, the check's temporaries
