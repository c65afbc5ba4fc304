"""Grouped-query attention (enable_gqa) against eager: a group's query heads become one attention's
rows where each row attends on its own; otherwise the attention prim takes the key/value heads
unrepeated (the executor repeats them only for a kernel that cannot read them grouped), and with
dropout they are repeated in the trace."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import compiler
from compiler.executors import attention
from compiler.prims import Prim
from tests.support.autodiff_util import check_gradients

SEEDS = [0, 1, 2]


def randn(*shape, seed, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def gqa(q, k, v, mask=None, causal=False):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=True)


def attended_kv_heads(jfn) -> list[int]:
    """The key heads of every attention prim of the last trace."""
    trace = compiler.last_traces(jfn)[-1]
    return [s.args[1].shape[-3] for b in trace.bsyms for s in (b, *b.subsymbols) if s.sym is Prim.SDPA]


def visible(keys: int, t: int) -> torch.Tensor:
    return torch.arange(keys)[None, :] <= torch.tensor([t])[:, None]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize(
    ("rows", "mask"),
    [
        (1, lambda keys: visible(keys, 4)),  # a decode step: (1, keys)
        (1, lambda keys: visible(keys, 2)[None, None]),  # (1, 1, 1, keys)
        (1, None),
        (5, None),
        (5, lambda keys: torch.rand(2, 1, 1, keys, generator=torch.Generator().manual_seed(9)) > 0.2),
        (3, lambda keys: torch.randn(1, keys)),  # an additive float mask
    ],
)
def test_a_groups_query_heads_attend_as_rows_of_one_kv_head(seed, dtype, rows, mask):
    q = randn(2, rows, 8, 16, seed=seed, dtype=dtype).transpose(1, 2)  # a model's (batch, heads, rows, d) view
    k, v = randn(2, 2, 7, 16, seed=seed + 1, dtype=dtype), randn(2, 2, 7, 16, seed=seed + 2, dtype=dtype)
    m = None if mask is None else mask(7)
    if m is not None and m.is_floating_point():
        m = m.to(dtype)
    jfn = compiler.jit(gqa)
    torch.testing.assert_close(jfn(q, k, v, m), gqa(q, k, v, m))
    assert attended_kv_heads(jfn) == [2]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(
    ("mask", "causal"),
    [
        (lambda g: torch.rand(5, 7, generator=g) > 0.3, False),
        (lambda g: torch.rand(2, 8, 1, 7, generator=g) > 0.3, False),
        (lambda g: torch.randn(2, 8, 5, 7, generator=g), False),  # a float mask per head
        (None, True),
    ],
    ids=["rows_differ", "heads_differ", "float_heads_differ", "causal"],
)
def test_masks_that_differ_by_row_or_head_and_causal_attention_read_unrepeated_kv_heads(seed, mask, causal):
    m = None if mask is None else mask(torch.Generator().manual_seed(seed))
    if m is not None and m.dtype == torch.bool:
        m[..., 0] = True
    q, k, v = randn(2, 8, 5, 16, seed=seed), randn(2, 2, 7, 16, seed=seed + 1), randn(2, 2, 7, 16, seed=seed + 2)
    jfn = compiler.jit(gqa)
    torch.testing.assert_close(jfn(q, k, v, m, causal), gqa(q, k, v, m, causal))
    assert attended_kv_heads(jfn) == [2]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("causal", "mask"), [(True, None), (False, "rows"), (False, "float")])
def test_gradients_of_unrepeated_kv_heads_match_eager(seed, causal, mask):
    q, k, v = randn(2, 8, 5, 16, seed=seed), randn(2, 2, 7, 16, seed=seed + 1), randn(2, 2, 7, 16, seed=seed + 2)
    m = {None: None, "rows": torch.rand(5, 7, generator=torch.Generator().manual_seed(seed)) > 0.3}.get(mask)
    if mask == "rows":
        m[..., 0] = True
    if mask == "float":
        m = randn(2, 1, 5, 7, seed=seed + 3)
    check_gradients(gqa, [q, k, v, m, causal], [True, True, True, False, False])


def test_a_float_mask_that_requires_grad_differentiates_grouped_heads_in_prims():
    q, k, v = randn(2, 8, 5, 16, seed=0), randn(2, 2, 7, 16, seed=1), randn(2, 2, 7, 16, seed=2)
    check_gradients(gqa, [q, k, v, randn(2, 8, 5, 7, seed=3)], [True, True, True, True])


def test_a_value_head_dim_no_fused_kernel_takes_repeats_the_heads_at_run_time():
    # FlashAttention needs v's head dim equal to q's: torch picks its math path, for which the
    # executor repeats the key/value heads (forward and backward) before calling it.
    q, k, v = randn(2, 8, 5, 16, seed=0), randn(2, 2, 7, 16, seed=1), randn(2, 2, 7, 12, seed=2)
    assert attention.attention_backend(q, k, v, None, True, None) is None
    torch.testing.assert_close(compiler.jit(gqa)(q, k, v, None, True), gqa(q, k, v, None, True))
    check_gradients(gqa, [q, k, v, None, True], [True, True, True, False, False])


def test_with_dropout_the_kv_heads_are_repeated_in_the_trace():
    def attend(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, dropout_p=0.3, is_causal=True, enable_gqa=True)

    q, k, v = randn(2, 8, 5, 16, seed=0), randn(2, 2, 7, 16, seed=1), randn(2, 2, 7, 16, seed=2)
    torch.manual_seed(4)
    expected = attend(q, k, v)
    torch.manual_seed(4)
    torch.testing.assert_close(compiler.jit(attend)(q, k, v), expected)


def test_batch_dims_broadcast_and_three_dim_inputs():
    q, k, v = randn(8, 1, 16, seed=0), randn(3, 2, 7, 16, seed=1), randn(3, 2, 7, 16, seed=2)
    torch.testing.assert_close(compiler.jit(gqa)(q, k, v), gqa(q, k, v))
    q3, k3, v3 = randn(6, 4, 16, seed=3), randn(3, 7, 16, seed=4), randn(3, 7, 16, seed=5)
    torch.testing.assert_close(compiler.jit(gqa)(q3, k3, v3), gqa(q3, k3, v3))


@pytest.mark.parametrize("rows", [1, 4])
def test_gradients_through_the_grouped_rows_match_eager(rows):
    q, k, v = randn(2, 8, rows, 16, seed=0), randn(2, 2, 7, 16, seed=1), randn(2, 2, 7, 16, seed=2)
    check_gradients(gqa, [q, k, v, visible(7, 5)], [True, True, True, False])


def test_query_heads_not_a_multiple_of_the_kv_heads_is_an_error_naming_both():
    q, k = randn(2, 6, 1, 16, seed=0), randn(2, 4, 7, 16, seed=1)
    with pytest.raises(ValueError, match=r"query heads \(6\) must be a multiple of the key/value heads \(4\)"):
        compiler.jit(gqa)(q, k, k)


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [1, 4])
def test_a_bf16_decode_step_on_cuda_attends_per_kv_head_and_matches_eager(rows):
    q = randn(4, rows, 32, 128, seed=0, dtype=torch.bfloat16).cuda().transpose(1, 2)
    k, v = (randn(4, 8, 1024, 128, seed=s, dtype=torch.bfloat16).cuda() for s in (1, 2))
    mask = visible(1024, 700).cuda()
    jfn = compiler.jit(gqa)
    torch.testing.assert_close(jfn(q, k, v, mask), gqa(q, k, v, mask), atol=2e-2, rtol=2e-2)
    assert attended_kv_heads(jfn) == [8]
