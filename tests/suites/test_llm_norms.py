"""suites/llm_norms.py: each pattern is one fusion of our compiler, nothing left outside it
(nvFuser's CPU fake: the same partition and definitions as on a GPU)."""

from __future__ import annotations

import pytest
import torch

import compiler
from compiler import examine
from compiler.core.executor import Reason
from suites import llm_norms
from tests.support.nvfuser_helpers import fake_nvfuser  # noqa: F401 - a fixture


@pytest.mark.parametrize("case", llm_norms.CASES, ids=lambda case: case.name)
def test_each_pattern_is_one_fusion_with_nothing_outside(case, fake_nvfuser) -> None:  # noqa: F811
    params = {key: values[0] for key, values in case.quick_params.items()}
    inputs = case.make_inputs(params, torch.device("cpu"), 0)
    jfn = compiler.jit(case.fn, executors=["nvfuser", "torch"])
    out = jfn(*inputs)
    torch.testing.assert_close(out, case.fn(*inputs), atol=2e-2, rtol=2e-2)
    assert len(examine.fusions(jfn)) == 1, examine.fusions(jfn)
    outside = [d for d in examine.why_not_fused(jfn) if d.reason is not Reason.HOST]
    assert not outside, examine.why_not_fused(jfn)
