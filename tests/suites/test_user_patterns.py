"""The user_patterns suite: every pattern in every form is a case, our compiler matches eager on
each at quick sizes, and the bytes models count what each form reads and writes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import compiler
from suites import user_patterns
from suites.user_patterns import FORMS, PATTERNS

CASES = {case.name: case for case in user_patterns.CASES}


def test_every_pattern_is_generated_in_every_form() -> None:
    assert len(CASES) == len(user_patterns.CASES) == len(PATTERNS) * len(FORMS)
    assert {f"{p.name}__{f.name}" for p in PATTERNS for f in FORMS} == set(CASES)
    for case in CASES.values():
        (params,) = case.grid(quick=True)
        assert params["tokens"] == 16 and params["dtype"] == "bfloat16"
        assert [p["tokens"] for p in case.grid(quick=False)] == [2048, 4096, 8192, 16384]


def test_the_forms_write_the_loss_as_transformers_does() -> None:
    case = CASES["cross_entropy__float_first"]
    logits, targets = case.make_inputs(case.grid(quick=True)[0], torch.device("cpu"), 0)
    expected = F.cross_entropy(logits.float(), targets)
    actual = case.fn(logits, targets)
    assert actual.dtype == torch.float32 and torch.equal(actual, expected)
    x = torch.randn(4, 6, dtype=torch.bfloat16)
    assert CASES["rms_norm__float_first_cast_back"].fn(x, x[0]).dtype == torch.bfloat16
    assert CASES["rms_norm__float_first"].fn(x, x[0]).dtype == torch.float32
    assert CASES["gelu__float_first_cast_back"].fn(x).dtype == torch.bfloat16
    assert CASES["gelu__cast_after"].fn(x).dtype == torch.float32
    assert torch.equal(CASES["gelu__viewed"].fn(x), CASES["gelu__as_written"].fn(x))


@pytest.mark.parametrize("name", sorted(CASES))
def test_our_compiler_matches_eager_at_quick_sizes(name: str) -> None:
    case = CASES[name]
    (params,) = case.grid(quick=True)
    jfn = compiler.jit(case.fn)
    for seed in (0, 1):
        args = case.make_inputs(params, torch.device("cpu"), seed)
        expected, actual = case.fn(*args), jfn(*args)
        assert actual.dtype == expected.dtype and actual.shape == expected.shape
        torch.testing.assert_close(actual, expected, rtol=1.6e-2, atol=2e-2)
    assert compiler.cache_stats(jfn).misses == 1


def test_bytes_models_read_inputs_and_write_results_once_at_their_dtypes() -> None:
    small = {"tokens": 4, "width": 8, "dtype": "bfloat16"}
    # logits 4x8 bf16 read, 4 int64 targets read, one scalar written (float32 in float_first)
    assert CASES["cross_entropy__as_written"].bytes_moved(small) == 4 * 8 * 2 + 4 * 8 + 2
    assert CASES["cross_entropy__float_first"].bytes_moved(small) == 4 * 8 * 2 + 4 * 8 + 4
    # x and a weight read, y written: bf16 back, or float32 left
    assert CASES["rms_norm__float_first_cast_back"].bytes_moved(small) == (32 + 8 + 32) * 2
    assert CASES["rms_norm__float_first"].bytes_moved(small) == (32 + 8) * 2 + 32 * 4
    # gate and up read, one written
    assert CASES["swiglu__viewed"].bytes_moved(small) == 3 * 32 * 2
