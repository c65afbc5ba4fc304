"""On CUDA: device-event timing, L2 flushing, kernel counts; with nvFuser: the hand-written fusion."""

from __future__ import annotations

import os

import pytest
import torch

from fusebench.cases.discovery import discover
from fusebench.cases.variants import EAGER
from fusebench.measure.measure import Settings, measure_variant, prepare_case
from fusebench.measure.timing import L2Flusher, make_timer


def gelu_case():
    (suite,) = [s for s in discover() if s.name == "gelu_backward"]
    return suite, next(c for c in suite.cases if c.name == "gelu_bias_backward")


@pytest.mark.gpu
def test_eager_gelu_on_cuda_counts_kernels_and_times_with_events() -> None:
    suite, case = gelu_case()
    settings = Settings(device=torch.device("cuda"), budget_s=0.05, peak_bandwidth_gbs=1000.0)
    prepared = prepare_case(suite.name, case, {"shape": (4, 64, 256), "dtype": "float32"}, settings)
    outcome = measure_variant(prepared, EAGER, settings)
    assert outcome.status == "ok", outcome.detail
    assert outcome.kernels_per_call is not None and outcome.kernels_per_call >= 10  # one per eager op
    assert 0 < outcome.timing.median < 0.01


@pytest.mark.gpu
def test_device_timer_measures_device_time_and_the_flush_buffer_exceeds_l2() -> None:
    device = torch.device("cuda")
    flusher = L2Flusher(device)
    assert flusher.buffer is not None
    assert flusher.buffer.numel() >= torch.cuda.get_device_properties(device).L2_cache_size
    x = torch.empty(1 << 26, device=device)
    seconds = make_timer("device", device).time(lambda: x.zero_())  # 256 MiB written
    assert 1e-6 < seconds < 0.1


@pytest.mark.nvfuser
def test_the_hand_written_fusion_definition_matches_the_reference() -> None:
    suite, case = gelu_case()
    settings = Settings(device=torch.device("cuda"), budget_s=0.05)
    (nvfuser,) = case.extra_variants
    for dtype in ("float32", "bfloat16"):
        prepared = prepare_case(suite.name, case, {"shape": (4, 64, 256), "dtype": dtype}, settings)
        outcome = measure_variant(prepared, nvfuser, settings)
        assert outcome.status == "ok", outcome.detail
        assert outcome.kernels_per_call is not None and outcome.kernels_per_call >= 1


@pytest.mark.gpu
def test_kernel_counts_tear_cupti_down_and_stay_right_across_cuda_graphs() -> None:
    from fusebench.measure.profiling import count_kernels

    device = torch.device("cuda")
    x = torch.randn(1024, device=device)
    step = lambda: (x * 2 + 1).sin()  # three eager kernels
    assert count_kernels(step, device) == 3
    assert os.environ.get("TEARDOWN_CUPTI") == "1"
    graph, static = torch.cuda.CUDAGraph(), {}
    step()
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        static["out"] = step()
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(static["out"], (x * 2 + 1).sin())
    assert count_kernels(step, device) == 3  # CUPTI set up again after its teardown
    assert count_kernels(graph.replay, device) >= 1
