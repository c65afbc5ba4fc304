"""A fusion region whose compiler fails: the warning and the fallback log say what failed, in one
line, and the harness counts the region."""

from __future__ import annotations

import warnings

import pytest
import torch

import compiler
from compiler.executors.nvfuser.executor import TorchRunner
from compiler.executors.region_fallback import SUMMARY_CHARS, FusionFallbackWarning, error_summary
from fusebench.cases.variants import OURS, Variant, fusebench_prepare
from fusebench.measure.measure import Settings, measure_variant, prepare_case
from tests.support.fakes import tiny_case

# nvFuser's errors as nvfuser_direct 0.2.36 words them (messages of real failures on a GPU,
# shortened): an assert with its check on the next line, a check that failed without an assert,
# and a segment's error wrapped by the parallel compilation of a segmented fusion
ASSERT = (
    " INTERNAL ASSERT FAILED at /workspace/Fuser/csrc/fusion.cpp:1020, please report a bug with repro script to "
    "NVFuser at https://github.com/NVIDIA/Fuser/issues. \n"
    "Expected id0->extent()->sameAs(id1->extent()) . Invalid domains to map: iS415{i0}, iS273{i7}\n"
    "Exception raised from registerExactMapping at /workspace/Fuser/csrc/fusion.cpp:1020 (most recent call first):\n"
    "frame #0: nvfuser::nvfCheckFail(char const*, char const*, long, std::string const&) + 0x9d\n"
)
CHECK = (
    "Expected found_non_rfactor_reduction . Must have at least one reduction axis not marked as rfactor.\n"
    "Exception raised from rFactor at /workspace/Fuser/csrc/tensor_view.cpp:912 (most recent call first):\n"
    "frame #0: nvfuser::nvfCheckFail(char const*, char const*, long, std::string const&) + 0x9d\n"
)
PARALLEL = (
    " INTERNAL ASSERT FAILED at /workspace/Fuser/csrc/runtime/fusion_kernel_runtime.cpp:476, please report a bug "
    "with repro script to NVFuser at https://github.com/NVIDIA/Fuser/issues. Expected thread_pool_error_message.empty()"
    " . Detected exception while compiling fusion segments in parallel. Error messages from all threads are printed "
    "below.\n\nError from segmentation group 3: " + ASSERT + "\nUse NVFUSER_DISABLE=parallel_compile to simplify "
    "error message.\nException raised from compileFusionParallel at "
    "/workspace/Fuser/csrc/runtime/fusion_kernel_runtime.cpp:476 (most recent call first):\nframe #0: x\n"
)
MAPPING = "RuntimeError: fusion.cpp:1020: Expected id0->extent()->sameAs(id1->extent()) . Invalid domains to map: iS415{i0}, iS273{i7}"  # noqa: E501


@pytest.mark.parametrize(
    ("message", "summary"),
    [
        (ASSERT, MAPPING),
        (PARALLEL, MAPPING),
        (
            CHECK,
            "RuntimeError: tensor_view.cpp:912: Expected found_non_rfactor_reduction . Must have at least one "
            "reduction axis not marked as rfactor.",
        ),
        ("nvFuser exploded\nsecond line", "RuntimeError: nvFuser exploded"),
        ("prims.slice: Expected 0 <= start\nExpected more", "RuntimeError: prims.slice: Expected 0 <= start"),
        ("", "RuntimeError: "),
    ],
    ids=["assert", "parallel-compile", "check", "plain", "not-nvfuser", "empty"],
)
def test_the_summary_is_the_innermost_check_and_where_it_failed(message: str, summary: str) -> None:
    assert error_summary(RuntimeError(message)) == summary


def test_a_long_message_is_cut() -> None:
    summary = error_summary(ValueError("x" * 1000))
    assert summary == "ValueError: " + "x" * SUMMARY_CHARS


def _failing(monkeypatch: pytest.MonkeyPatch, message: str) -> None:
    def boom(self, fusion, args, key):
        raise RuntimeError(message)

    monkeypatch.setattr(TorchRunner, "run", boom)


def _program(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a * 2 + b).sin()


def test_a_region_that_falls_back_warns_and_is_logged_with_the_check_that_failed(monkeypatch) -> None:
    _failing(monkeypatch, PARALLEL)
    before = compiler.examine.fallbacks_recorded()
    jfn = compiler.jit(_program, executors=["nvfuser"], fusion={"runner": "torch"})
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    with pytest.warns(FusionFallbackWarning) as caught:
        for _ in range(2):
            torch.testing.assert_close(jfn(a, b), _program(a, b))
    (warning,) = [w for w in caught if issubclass(w.category, FusionFallbackWarning)]
    assert f"nvFuser failed on nvFusion0 ({MAPPING}); nvFusion0 now runs as its 3 prims with torch" in str(
        warning.message
    )
    (logged,) = compiler.examine.fallbacks(since=before)
    assert (logged.kind, logged.what, logged.where) == ("fusion", "nvFusion0 (3 prims)", "")
    assert logged.reason == f"nvFuser failed: {MAPPING}; runs as its 3 prims with torch"
    assert str(logged) == f"nvFusion0 (3 prims) fell back (fusion): {logged.reason}"


def test_the_fusebench_variant_counts_regions_that_fell_back(monkeypatch) -> None:
    variant = Variant(OURS, fusebench_prepare(["nvfuser", "torch"], fusion={"runner": "torch"}))
    case = tiny_case(
        fn=_program,
        make_inputs=lambda params, device, seed: (torch.randn(4, params["n"]), torch.randn(4, params["n"])),
        reference=_program,
    )
    settings = Settings(device=torch.device("cpu"), budget_s=0.01, min_repeats=3)
    prepared = prepare_case("tiny", case, case.grid(quick=True)[0], settings)
    assert measure_variant(prepared, variant, settings).fallbacks == 0
    _failing(monkeypatch, CHECK)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FusionFallbackWarning)
        outcome = measure_variant(prepared, variant, settings)
    assert outcome.status == "ok", outcome.detail
    assert outcome.fallbacks == 1
