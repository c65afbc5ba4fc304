"""`nn.MultiheadAttention` and `F.multi_head_attention_forward` (SigLIP's pooling head, WavLM) through
the compiler against eager: packed and separate projections, biases on or off, bias_k/bias_v,
add_zero_attn, batch_first and unbatched inputs, bool and float masks, explicit attention weights
(averaged over heads or not) or fused attention; outputs and every parameter's gradient."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import compiler

L, S, B, EMBED, HEADS = 3, 5, 2, 8, 2


class _Functional(torch.nn.Module):
    """The module's parameters through `F.multi_head_attention_forward` itself, as SigLIP's pooling
    head and WavLM call it."""

    def __init__(self, attention: torch.nn.MultiheadAttention) -> None:
        super().__init__()
        self.attention = attention

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kwargs: Any) -> tuple:
        a = self.attention
        return F.multi_head_attention_forward(
            q, k, v, EMBED, HEADS, a.in_proj_weight, a.in_proj_bias, a.bias_k, a.bias_v, a.add_zero_attn, 0.0,
            a.out_proj.weight, a.out_proj.bias, training=False, use_separate_proj_weight=not a._qkv_same_embed_dim,
            q_proj_weight=a.q_proj_weight, k_proj_weight=a.k_proj_weight, v_proj_weight=a.v_proj_weight, **kwargs,
        )  # fmt: skip


CASES = {
    "self-attention, weights": ({}, {}, "self"),
    "batch_first, fused": ({"batch_first": True}, {"need_weights": False}, "cross"),
    "unbatched, per-head weights": ({}, {"average_attn_weights": False}, "unbatched"),
    "separate projections, no bias": ({"kdim": 6, "vdim": 6, "bias": False}, {}, "cross"),
    "bias_k and zero attention": ({"add_bias_kv": True, "add_zero_attn": True}, {"need_weights": False}, "cross"),
    "bool masks": ({}, {"key_padding_mask": "bool", "attn_mask": "bool"}, "functional"),
    "the module, bool masks": ({}, {"key_padding_mask": "bool", "attn_mask": "bool"}, "cross"),
    "the module, float masks, fused": (
        {"batch_first": True},
        {"key_padding_mask": "float", "attn_mask": "float", "need_weights": False},
        "cross",
    ),
    "float masks, fused": (
        {"add_zero_attn": True},
        {"key_padding_mask": "float", "attn_mask": "float", "need_weights": False},
        "functional",
    ),
}  # fmt: skip


def _inputs(kind: str, kdim: int, batch_first: bool) -> tuple:
    if kind == "unbatched":
        return torch.randn(L, EMBED), torch.randn(S, kdim), torch.randn(S, kdim)
    q = torch.randn(L, B, EMBED)
    if kind == "self":
        return q, q, q
    k, v = torch.randn(S, B, kdim), torch.randn(S, B, kdim)
    return tuple(t.transpose(0, 1) for t in (q, k, v)) if batch_first else (q, k, v)


def _masks(kwargs: dict) -> dict:
    kinds = {"bool": lambda *shape: torch.rand(shape) < 0.2, "float": lambda *shape: torch.randn(shape)}
    out = dict(kwargs)
    if "key_padding_mask" in kwargs:
        out["key_padding_mask"] = kinds[kwargs["key_padding_mask"]](B, S)
    if "attn_mask" in kwargs:
        out["attn_mask"] = (
            kinds[kwargs["attn_mask"]](L, S) if kwargs["attn_mask"] == "bool" else torch.randn(B * HEADS, L, S)
        )
    return out


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", list(CASES))
def test_multi_head_attention_matches_eager(name: str, seed: int) -> None:
    settings, kwargs, kind = CASES[name]
    torch.manual_seed(seed)
    attention = torch.nn.MultiheadAttention(EMBED, HEADS, **settings)
    eager = _Functional(attention) if kind == "functional" else attention
    model = copy.deepcopy(eager)
    inputs = _inputs(kind, settings.get("kdim", EMBED), settings.get("batch_first", False))
    kwargs = _masks(kwargs)
    got, expected = compiler.jit(model)(*inputs, **kwargs), eager(*inputs, **kwargs)
    for index, (g, e) in enumerate(zip(got, expected, strict=True)):
        assert (g is None) == (e is None), f"output {index}"
        if e is not None:
            torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5, msg=lambda m, index=index: f"output {index}: {m}")
    weights = torch.randn(expected[0].shape)
    (got[0] * weights).sum().backward()
    (expected[0] * weights).sum().backward()
    for (parameter, g), e in zip(model.named_parameters(), eager.parameters(), strict=True):
        torch.testing.assert_close(g.grad, e.grad, rtol=1e-5, atol=1e-5, msg=lambda m, p=parameter: f"{p}: {m}")


def test_a_key_padding_mask_over_changing_lengths_compiles_twice() -> None:
    """F.multi_head_attention_forward checks the mask's length with torch._check_with on sizes that
    automatic dynamic made symbolic: the check is decided and guarded, not a reason to specialise."""
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(16, 4, batch_first=True).eval()
    jitted = compiler.jit(mha)
    for length in (5, 6, 7, 9):
        x = torch.randn(2, length, 16)
        mask = torch.zeros(2, length, dtype=torch.bool)
        mask[0, -2:] = True
        got, want = jitted(x, x, x, key_padding_mask=mask), mha(x, x, x, key_padding_mask=mask)
        torch.testing.assert_close(got[0], want[0])
        torch.testing.assert_close(got[1], want[1])
    assert compiler.cache_stats(jitted).misses == 2
    bad = torch.zeros(2, 8, dtype=torch.bool)  # a mask of another length: eager's error
    with pytest.raises(AssertionError, match=r"Expected key_padded_mask.shape\[1\] to be 9, but got 8"):
        jitted(x, x, x, key_padding_mask=bad)
