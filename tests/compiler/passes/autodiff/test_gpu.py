"""Autodiff on a GPU with nvFuser: forward and backward fusions, and gradients against eager.

Run with `python3 -m pytest -m nvfuser tests/compiler/passes/autodiff/test_gpu.py -q` on the GPU machine;
skipped with a reason without CUDA or nvfuser_direct.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import compiler
from compiler.executors.nvfuser.executor import region_fusions
from tests.support.autodiff_util import check_gradients

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


def test_cross_entropy_at_a_32k_vocabulary_fuses_forward_and_backward_and_reports_kernels():
    """bf16 logits [8192, 32000] with ignored targets: gradients against eager (in float32, scaled to
    the gradient's size), one fusion each way, and the kernels nvFuser split each into (printed)."""

    def loss(logits, target):
        return F.cross_entropy(logits, target, ignore_index=-100)

    generator = torch.Generator(device=DEVICE).manual_seed(0)
    x = torch.randn(8192, 32000, device=DEVICE, generator=generator).mul_(3).to(torch.bfloat16)
    target = torch.randint(0, 32000, (8192,), device=DEVICE, generator=generator)
    target[::7] = -100
    jfn = jit(loss)
    mine, eager = x.clone().requires_grad_(), x.float().requires_grad_()
    out = jfn(mine, target)
    out.backward()
    expected = loss(eager, target)
    expected.backward()
    torch.testing.assert_close(out.float(), expected, atol=1e-2, rtol=1e-2)
    scale = eager.grad.abs().max().item()
    torch.testing.assert_close(mine.grad.float(), eager.grad, atol=1e-2 * scale, rtol=1e-2)

    forward, backward = compiler.last_traces(jfn)[-1], compiler.last_backward_traces(jfn)[-1]
    assert fusions(forward) == 1 and outside_fusions(forward) == []
    assert fusions(backward) == 1 and outside_fusions(backward) == []
    print(compiler.examine.saved_for_backward(jfn))
    kernels = {}
    for direction, is_backward in (("forward", False), ("backward", True)):
        (report,) = compiler.examine.segments(jfn, backward=is_backward)
        kernels[direction] = len(report.kernels)
        print(f"cross_entropy {direction}:\n{report}")
    print(f"cross_entropy [8192, 32000] bf16 kernels: {kernels}")
    # NOTE: the forward's row max, sum of exps and target logit (take_along_axis), then the sums
    # over rows; the backward, softmax - onehot, is one pointwise kernel. With nvFuser's gather
    # the forward took 4 (the gather its own ATen segment), before the logsumexp rewrite about 6.
    assert kernels["backward"] == 1 and kernels["forward"] == 2
