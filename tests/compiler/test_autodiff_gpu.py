"""Autodiff on a GPU with nvFuser: forward and backward fusions, and gradients against eager.

Run with `python3 -m pytest -m nvfuser tests/compiler/test_autodiff_gpu.py -q` on the GPU machine;
skipped with a reason without CUDA or nvfuser_direct.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import compiler
from compiler.executors.nvfuser import region_fusions
from tests.compiler.autodiff_util import check_gradients

pytestmark = pytest.mark.nvfuser
DEVICE = "cuda"


def jit(fn):
    return compiler.jit(fn, executors=["nvfuser", "sdpa", "torch"], fallback=False)


def fusions(trace) -> int:
    return len(region_fusions(trace))


def outside_fusions(trace) -> list[str]:
    return [str(b).splitlines()[0] for b in trace.bsyms if getattr(b.sym, "executor", None) != "nvfuser"]


def gelu(x):
    return F.gelu(x, approximate="tanh")


def gelu_bias(x, b):
    return F.gelu(x + b, approximate="tanh")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_gelu_forward_is_one_fusion_and_its_backward_one_fusion(dtype):
    jfn = jit(gelu)
    check_gradients(gelu, [torch.randn(256, 512, device=DEVICE, dtype=dtype)], jfn=jfn)
    forward, backward = compiler.last_traces(jfn)[-1], compiler.last_backward_traces(jfn)[-1]
    assert fusions(forward) == 1 and outside_fusions(forward) == []
    assert fusions(backward) == 1 and outside_fusions(backward) == []
    assert [v.name for v in compiler.examine.saved_for_backward(jfn)] == ["x"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_gelu_bias_backward_is_one_fusion(dtype):
    jfn = jit(gelu_bias)
    args = [torch.randn(64, 128, 256, device=DEVICE, dtype=dtype), torch.randn(256, device=DEVICE, dtype=dtype)]
    # NOTE: the bias gradient sums 8192 rows; eager rounds each row's bf16 gradient before summing
    # (0.29 apart from ours on the H100), the fusion sums in float32: both are checked against float32.
    check_gradients(gelu_bias, args, jfn=jfn, reference_dtype=torch.float32)
    backward = compiler.last_backward_traces(jfn)[-1]
    assert fusions(backward) == 1 and outside_fusions(backward) == []


def test_cross_entropy_and_attention_gradients_on_cuda():
    def loss(logits, target):
        return F.cross_entropy(logits, target, ignore_index=-100)

    target = torch.randint(0, 1000, (64,), device=DEVICE)
    target[::5] = -100
    check_gradients(loss, [torch.randn(64, 1000, device=DEVICE, dtype=torch.bfloat16), target], jfn=jit(loss))

    def attention(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    q, k, v = (torch.randn(2, 4, 128, 64, device=DEVICE, dtype=torch.bfloat16) for _ in range(3))
    jfn = jit(attention)
    check_gradients(attention, [q, k, v], jfn=jfn)
    backward = compiler.last_backward_traces(jfn)[-1]
    assert "sdpa_backward" in str(backward)
