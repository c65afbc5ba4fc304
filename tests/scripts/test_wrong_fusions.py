"""scripts/wrong_fusions.py: fusions checked against their own prims run by torch (here through the
CPU fake of nvFuser)."""

from __future__ import annotations

import pytest
import torch

import compiler
from compiler import prims
from compiler.executors.nvfuser.executor import NvFuserRunner
from scripts import wrong_fusions
from tests.support.nvfuser_helpers import fake_nvfuser, prim_trace  # noqa: F401  (fixture)

BF16 = torch.bfloat16


def norm_then_scale(x, w):
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), w) * 2, (x * x).sum(-1)


def _run(x, w):
    with wrong_fusions.checking_fusions() as found:
        jfn = compiler.jit(norm_then_scale, executors=["nvfuser", "torch"], fallback=False)
        jfn(x, w)
    return found


@pytest.mark.usefixtures("fake_nvfuser")
def test_right_fusions_are_not_reported():
    assert _run(torch.randn(4, 8), torch.randn(8)) == []


@pytest.mark.usefixtures("fake_nvfuser")
def test_a_wrong_output_is_reported_with_the_region_and_its_source(monkeypatch: pytest.MonkeyPatch):
    run = NvFuserRunner.run

    def second_output_off(self, fusion, args, key):
        outputs = run(self, fusion, args, key)
        return [outputs[0], outputs[1] + 1]

    monkeypatch.setattr(NvFuserRunner, "run", second_output_off)
    [wrong] = _run(torch.randn(4, 8), torch.randn(8))
    assert (wrong.name, wrong.output) == ("nvFusion0", 1) and 0.01 < wrong.error < float("inf")
    text = str(wrong)
    assert "nvFusion0 output 1: relative error" in text
    assert "x: torch.float32 (4, 8) strides (8, 1)" in text and "prims.sum" in text and "def nvfusion_0(fd)" in text


def large_logits_softmax(x):
    return torch.softmax(x * 3.7 + 100.0, -1) * 5


@pytest.mark.usefixtures("fake_nvfuser")
def test_a_fusion_nearer_float64_than_torchs_rounding_is_not_reported():
    # bf16 logits near 100 rounded after every prim (torch) move the softmax by tens of percent
    # against the fusion's fp32; float64 says the fusion is the nearer one
    x = torch.randn(64, 256, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16) * 4
    with wrong_fusions.checking_fusions() as found:
        jfn = compiler.jit(large_logits_softmax, executors=["nvfuser", "torch"], fallback=False)
        got = jfn(x)
    assert wrong_fusions._error(got, large_logits_softmax(x)) > wrong_fusions.TOLERANCE
    assert found == []


@pytest.mark.usefixtures("fake_nvfuser")
def test_a_wrong_bf16_output_is_reported_with_both_errors_against_float64(monkeypatch: pytest.MonkeyPatch):
    run = NvFuserRunner.run

    def scaled(self, fusion, args, key):
        return [o * 1.5 for o in run(self, fusion, args, key)]

    monkeypatch.setattr(NvFuserRunner, "run", scaled)
    x = torch.randn(64, 256, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    with wrong_fusions.checking_fusions() as found:
        compiler.jit(large_logits_softmax, executors=["nvfuser", "torch"], fallback=False)(x)
    [wrong] = found
    fusion, prims = wrong.refereed
    assert fusion > 0.3 and prims < 0.1, wrong.refereed
    assert "(against float64: " in str(wrong).splitlines()[0]


def test_the_float64_function_widens_every_floating_dtype_it_names():
    def chain(x):
        tripled = prims.convert_element_type(prims.mul(prims.convert_element_type(x, torch.float32), 3.0), BF16)
        return prims.add(tripled, prims.full([5], 1.1, BF16, x.device))

    trace = prim_trace(chain, ((5,), BF16))
    region = wrong_fusions.Region("chain", tuple(trace.bsyms), trace.inputs, (trace.output,))
    x = torch.randn(5, dtype=BF16)
    [exact] = wrong_fusions.float64_function(region)(x.double())
    assert exact.dtype == torch.float64
    torch.testing.assert_close(exact, x.double() * 3 + 1.1, rtol=0, atol=1e-15)


def test_errors_compare_shapes_dtypes_and_nans():
    a = torch.tensor([1.0, float("nan"), 4.0])
    assert wrong_fusions._error(a, a.clone()) == 0.0
    assert wrong_fusions._error(a[:2], a) == float("inf") and wrong_fusions._error(a.double(), a) == float("inf")
    assert wrong_fusions._error(a + torch.tensor([0.0, 0.0, 0.4]), a) == pytest.approx(0.1)
    assert wrong_fusions._error(torch.tensor([1, 2]), torch.tensor([1, 3])) == float("inf")


def test_a_zoo_model_through_the_fake(capsys: pytest.CaptureFixture[str]):
    pytest.importorskip("transformers")
    assert wrong_fusions.main(["gpt2", "--fake"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "gpt2: 0 fusions disagree with their prims run by torch (the CPU fake of nvFuser)"
    )
    with pytest.raises(SystemExit, match="no zoo architecture is named 'gpt-5'"):
        wrong_fusions.main(["gpt-5", "--fake"])
