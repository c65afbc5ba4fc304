"""Attention under autodiff on CPU: the forward keeps its logsumexp, the backward never runs the forward."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import compiler
from compiler.executors import attention
from tests.support.autodiff_util import AtenOps, check_gradients

DTYPES = [torch.float32, torch.bfloat16]


def randn(*shape, dtype=torch.float32, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def causal(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def masked(q, k, v, mask):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def scaled(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, scale=0.3)


def qkv(dtype, seed, rows=8, keys=8, batch=(2, 3)):
    return [randn(*batch, n, 16, dtype=dtype, seed=seed + i) for i, n in enumerate((rows, keys, keys))]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_causal_masked_and_scaled_attention_match_eager(dtype):
    for seed in range(2):
        check_gradients(causal, qkv(dtype, seed), seed=seed)
        check_gradients(causal, qkv(dtype, seed, rows=5, keys=9), seed=seed)
        check_gradients(scaled, qkv(dtype, seed, rows=6, keys=10), seed=seed)
        mask = randn(8, 8, dtype=dtype, seed=seed + 7)
        check_gradients(masked, [*qkv(dtype, seed), mask], [True, True, True, False], seed=seed)
        check_gradients(masked, [*qkv(dtype, seed), mask > 0], [True, True, True, False], seed=seed)


def test_the_forward_saves_output_and_logsumexp_and_the_backward_runs_only_the_fused_backward():
    jfn = compiler.jit(causal)
    q, k, v = (t.requires_grad_() for t in qkv(torch.float32, 0))
    out = jfn(q, k, v)
    forward = str(compiler.last_traces(jfn)[-1])
    assert "prims.sdpa_forward(" in forward
    saved = compiler.examine.saved_for_backward(jfn)
    assert [(s.shape, s.dtype) for s in saved][-1] == ((2, 3, 8), torch.float32)
    with AtenOps() as ops:
        out.backward(torch.randn_like(out))
    assert "_scaled_dot_product_flash_attention_for_cpu_backward" in ops.names
    assert not [n for n in ops.names if "attention" in n and "backward" not in n], ops.names


def test_inference_keeps_the_plain_attention_prim():
    jfn = compiler.jit(causal)
    with torch.no_grad():
        jfn(*(t.requires_grad_() for t in qkv(torch.float32, 0)))
    assert "prims.sdpa(" in str(compiler.last_traces(jfn)[-1])


def test_a_float_mask_that_requires_grad_gets_eagers_gradient():
    for dtype in DTYPES:
        mask = randn(8, 8, dtype=dtype, seed=3)
        jfn = check_gradients(masked, [*qkv(dtype, 1), mask], [True, True, True, True])
        assert "sdpa" not in str(compiler.last_backward_traces(jfn)[-1])
        broadcast = randn(2, 1, 8, 8, dtype=dtype, seed=4)
        check_gradients(masked, [*qkv(dtype, 2), broadcast], [False, True, False, True])


def test_inputs_the_fused_kernels_do_not_take_recompute_attention_in_the_backward():
    check_gradients(causal, qkv(torch.float32, 0, batch=(3,)))  # 3-D: the math backend
    check_gradients(causal, qkv(torch.float64, 1))


def test_a_missing_aten_op_falls_back_to_recomputing_with_one_warning(monkeypatch):
    monkeypatch.setitem(attention.OPS, "cpu_flash", ("_no_such_attention_op", "_no_such_attention_op_backward"))
    monkeypatch.setattr(attention, "_warned", set())
    monkeypatch.setattr(attention, "_BACKENDS", {})  # the backends answered before the ops went missing
    with pytest.warns(RuntimeWarning, match="_no_such_attention_op"):
        check_gradients(causal, qkv(torch.float32, 0))
    check_gradients(causal, qkv(torch.float32, 1))
    assert attention._warned == {"_no_such_attention_op", "_no_such_attention_op_backward"}
