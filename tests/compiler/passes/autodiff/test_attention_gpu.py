"""Attention under autodiff on CUDA, for each fused backend torch can pick: gradients against eager
(under the same `sdpa_kernel` choice), the backend used, and a backward that runs only the fused
backward kernel. Run with `python3 -m pytest -m gpu tests/compiler/passes/autodiff/test_attention_gpu.py -q`
on the GPU machine; skipped with a reason without CUDA.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import compiler
from compiler.executors.attention import OPS, attention_backend, repeat_heads
from tests.support.autodiff_util import AtenOps, check_gradients

pytestmark = pytest.mark.gpu
DEVICE = "cuda"
BACKENDS = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
}


def jit(fn):
    return compiler.jit(fn, executors=["sdpa", "torch"])


def causal(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def grouped_causal(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


def plain(q, k, v):
    return F.scaled_dot_product_attention(q, k, v)


def masked(q, k, v, mask):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def qkv(dtype, rows=128, keys=128, seed=0, kv_heads=4, head_dim=64):
    generator = torch.Generator(device=DEVICE).manual_seed(seed)
    return [
        torch.randn(2, heads, n, head_dim, device=DEVICE, dtype=dtype, generator=generator)
        for heads, n in ((4, rows), (kv_heads, keys), (kv_heads, keys))
    ]


def check_backend(backend, fn, args, requires_grad=None):
    """Gradients against eager under `sdpa_kernel(backend)`, the backend the compiler picks, and the
    aten ops its backward runs; skips when this GPU has no such kernel for these inputs."""
    with sdpa_kernel(BACKENDS[backend]):
        try:
            fn(*args)
        except RuntimeError as error:
            pytest.skip(f"eager has no {backend} kernel here: {str(error).splitlines()[0]}")
        q, k, v = args[:3]
        mask = args[3] if len(args) > 3 else None
        assert attention_backend(q, k, v, mask, fn in (causal, grouped_causal), None) == backend
        jfn = check_gradients(fn, args, requires_grad, jfn=jit(fn))
        assert "sdpa_forward" in str(compiler.last_traces(jfn)[-1])
        inputs = [a.detach().clone().requires_grad_(a.is_floating_point()) for a in args[:3]] + list(args[3:])
        out = jfn(*inputs)
        with AtenOps() as ops:
            out.backward(torch.randn_like(out))
    forward, backward = OPS[backend]
    assert backward in ops.names and forward not in ops.names, ops.names
    assert "repeat_interleave" not in ops.names, ops.names


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("backend", ["flash", "efficient", "cudnn"])
def test_causal_and_plain_attention_through_each_backend(backend, dtype):
    check_backend(backend, causal, qkv(dtype))
    check_backend(backend, plain, qkv(dtype, rows=96, keys=160, seed=1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_masked_attention_through_efficient_attention(dtype):
    q, k, v = qkv(dtype, rows=100, keys=72)
    float_mask = torch.randn(100, 72, device=DEVICE, dtype=dtype)
    check_backend("efficient", masked, [q, k, v, float_mask], [True, True, True, False])
    check_backend("efficient", masked, [q, k, v, float_mask > 0], [True, True, True, False])


def test_default_choice_and_a_mask_that_requires_grad():
    q, k, v = qkv(torch.bfloat16, rows=256, keys=256)
    jfn = check_gradients(causal, [q, k, v], jfn=jit(causal))
    assert "sdpa_backward" in str(compiler.last_backward_traces(jfn)[-1])
    mask = torch.randn(256, 256, device=DEVICE, dtype=torch.bfloat16)
    check_gradients(masked, [q, k, v, mask], [True, True, True, True], jfn=jit(masked))


@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("backend", ["flash", "cudnn"])
def test_grouped_query_causal_attention_reads_each_kv_head_once_in_flash_and_cudnn(backend, dtype, head_dim):
    # 4 query heads over 1 key/value head: forward and backward kernels take k and v unrepeated
    check_backend(backend, grouped_causal, qkv(dtype, rows=256, keys=256, kv_heads=1, head_dim=head_dim))


def test_grouped_query_attention_in_float32_repeats_the_heads_for_efficient_attention():
    q, k, v = qkv(torch.float32, rows=96, keys=96, kv_heads=2)
    assert attention_backend(q, k, v, None, True, None) is None
    assert attention_backend(q, repeat_heads(k, 2), repeat_heads(v, 2), None, True, None) == "efficient"
    jfn = check_gradients(grouped_causal, [q, k, v], jfn=jit(grouped_causal))
    assert "sdpa_backward" in str(compiler.last_backward_traces(jfn)[-1])


@pytest.mark.parametrize("mask_dtype", [torch.bfloat16, torch.bool], ids=str)
@pytest.mark.parametrize("kv_heads", [4, 2])
def test_masked_attention_through_cudnn_reads_the_saved_logsumexp(kv_heads, mask_dtype):
    # transformers builds a causal mask of 0 / -inf under tracing; cuDNN takes it as a bias, and
    # the backward runs cuDNN's backward kernel, not attention's forward again
    q, k, v = qkv(torch.bfloat16, rows=128, keys=128, kv_heads=kv_heads)
    keep = torch.ones(128, 128, dtype=torch.bool, device=DEVICE).tril().expand(2, 1, 128, 128).clone()
    mask = keep if mask_dtype == torch.bool else torch.zeros(keep.shape, device=DEVICE, dtype=mask_dtype)
    if mask_dtype != torch.bool:
        # a query row that attends to nothing gets zeros (eager's cuDNN averages v for a boolean
        # mask there: compiler/ops/masks.py)
        keep[1, :, 5] = False
        mask = mask.masked_fill(keep.logical_not(), float("-inf"))
    check_backend("cudnn", masked if kv_heads == 4 else grouped_masked, [q, k, v, mask], [True, True, True, False])


def grouped_masked(q, k, v, mask):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)


def three_layers(q, k, v, mask):
    for _ in range(3):
        q = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return q


def test_layers_reading_one_misaligned_mask_align_it_once():
    # rows of 72 elements: efficient attention takes the bias in rows aligned to 16, so the mask is
    # copied into aligned rows, once for the three layers' forwards and backwards
    q, k, v = qkv(torch.bfloat16, rows=72, keys=72)
    mask = torch.randn(72, 72, device=DEVICE, dtype=torch.bfloat16)
    with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
        jfn = check_gradients(three_layers, [q, k, v, mask], [True, True, True, False], jfn=jit(three_layers))
        inputs = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        with AtenOps() as ops:
            jfn(*inputs, mask).sum().backward()
    assert ops.names.count("new_zeros") == 1, ops.names
