"""`F.multi_head_attention_forward`: what `nn.MultiheadAttention` runs (SigLIP's pooling head,
WavLM's attention), decomposed as torch's own Python code decomposes it, over the ops it calls.

torch's helpers for the projections and the masks (`_mha_shape_check`, `_canonical_mask`,
`_in_projection_packed`, `_in_projection`) only call torch ops, so they run here over proxies as
they are; the body follows torch's: packed or separate projections, bias_k/bias_v, static keys and
values, add_zero_attn, key_padding_mask merged into attn_mask, explicit attention weights
(need_weights, averaged over heads or not) or fused attention, dropout in training only.
(`nn.MultiheadAttention`'s fast path, `torch._native_multi_head_attention`, is never taken while
tracing: torch takes it only for real tensors.)
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from compiler import prims
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy
from compiler.ops.registry import register

_NAME = "torch.nn.functional.multi_head_attention_forward"


def _check(condition: bool, message: str) -> None:
    check(condition, lambda: f"{_NAME}: {message}{called_at()}", RuntimeError)


def _mask(mask: Any, name: str, target: torch.dtype) -> Any:
    """A bool mask as an additive float one (-inf where True), as torch's `_canonical_mask`."""
    if mask is None:
        return None
    _check(isinstance(mask, TensorProxy), f"{name} must be None or a tensor")
    return F._canonical_mask(mask=mask, mask_name=name, other_type=None, other_name="", target_type=target)


@register(_NAME)
def multi_head_attention_forward(
    query: TensorProxy,
    key: TensorProxy,
    value: TensorProxy,
    embed_dim_to_check: int,
    num_heads: int,
    in_proj_weight: TensorProxy | None,
    in_proj_bias: TensorProxy | None,
    bias_k: TensorProxy | None,
    bias_v: TensorProxy | None,
    add_zero_attn: bool,
    dropout_p: float,
    out_proj_weight: TensorProxy,
    out_proj_bias: TensorProxy | None,
    training: bool = True,
    key_padding_mask: TensorProxy | None = None,
    need_weights: bool = True,
    attn_mask: TensorProxy | None = None,
    use_separate_proj_weight: bool = False,
    q_proj_weight: TensorProxy | None = None,
    k_proj_weight: TensorProxy | None = None,
    v_proj_weight: TensorProxy | None = None,
    static_k: TensorProxy | None = None,
    static_v: TensorProxy | None = None,
    average_attn_weights: bool = True,
    is_causal: bool = False,
) -> tuple[TensorProxy, TensorProxy | None]:
    """Multi-head attention over (sequence, batch, embedding) inputs (or unbatched ones): the
    output and, with need_weights, the attention weights."""
    is_batched = F._mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not is_batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        key_padding_mask = None if key_padding_mask is None else key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    key_padding_mask = _mask(key_padding_mask, "key_padding_mask", query.dtype)
    _check(not is_causal or attn_mask is not None, "is_causal=True needs attn_mask (as in torch)")
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None  # NOTE: as torch: the causal hint alone, to fused attention
    else:
        attn_mask = _mask(attn_mask, "attn_mask", query.dtype)
        is_causal = is_causal and key_padding_mask is None
    _check(embed_dim == embed_dim_to_check, f"expected an embedding of {embed_dim_to_check}, got {embed_dim}")
    head_dim = embed_dim // num_heads
    _check(head_dim * num_heads == embed_dim, f"embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
    if not use_separate_proj_weight:
        _check(in_proj_weight is not None, "use_separate_proj_weight is False but in_proj_weight is None")
        q, k, v = F._in_projection_packed(query, key, value, in_proj_weight, in_proj_bias)
    else:
        _check(
            all(w is not None for w in (q_proj_weight, k_proj_weight, v_proj_weight)),
            "use_separate_proj_weight is True but q_proj_weight, k_proj_weight or v_proj_weight is None",
        )
        b_q, b_k, b_v = (None, None, None) if in_proj_bias is None else in_proj_bias.chunk(3)
        q, k, v = F._in_projection(query, key, value, q_proj_weight, k_proj_weight, v_proj_weight, b_q, b_k, b_v)
    if attn_mask is not None and attn_mask.ndim == 2:
        _check(tuple(attn_mask.shape) == (tgt_len, src_len), f"a 2-d attn_mask must be ({tgt_len}, {src_len})")
        attn_mask = attn_mask.unsqueeze(0)
    elif attn_mask is not None:
        expected = (bsz * num_heads, tgt_len, src_len)
        _check(tuple(attn_mask.shape) == expected, f"a 3-d attn_mask must be {expected}")
    _check((bias_k is None) == (bias_v is None), "bias_k and bias_v must be given together")
    if bias_k is not None:
        _check(static_k is None and static_v is None, "bias_k and bias_v cannot be added to static keys or values")
        k = torch.cat([k, bias_k.repeat(1, bsz, 1)])
        v = torch.cat([v, bias_v.repeat(1, bsz, 1)])
        attn_mask = None if attn_mask is None else F.pad(attn_mask, (0, 1))
        key_padding_mask = None if key_padding_mask is None else F.pad(key_padding_mask, (0, 1))
    q = q.view(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k = k.view(k.shape[0], bsz * num_heads, head_dim).transpose(0, 1) if static_k is None else static_k
    v = v.view(v.shape[0], bsz * num_heads, head_dim).transpose(0, 1) if static_v is None else static_v
    for static in (static_k, static_v):
        _check(
            static is None or tuple(static.shape[::2]) == (bsz * num_heads, head_dim),
            f"static keys and values must be ({bsz * num_heads}, length, {head_dim})",
        )
    if add_zero_attn:
        zeros = prims.full([bsz * num_heads, 1, head_dim], 0.0, k.dtype, k.device)
        k, v = torch.cat([k, zeros], dim=1), torch.cat([v, zeros], dim=1)
        attn_mask = None if attn_mask is None else F.pad(attn_mask, (0, 1))
        key_padding_mask = None if key_padding_mask is None else F.pad(key_padding_mask, (0, 1))
    src_len = k.shape[1]
    if key_padding_mask is not None:
        F._check_key_padding_mask(key_padding_mask, src_len, bsz)
        key_padding_mask = (
            key_padding_mask.view(bsz, 1, 1, src_len).expand(-1, num_heads, -1, -1).reshape(bsz * num_heads, 1, src_len)
        )
        attn_mask = key_padding_mask if attn_mask is None else attn_mask + key_padding_mask
    dropout_p = dropout_p if training else 0.0
    if need_weights:
        _check(not (is_causal and attn_mask is None), "is_causal without a mask is not implemented for need_weights")
        q_scaled = q * math.sqrt(1.0 / float(q.shape[-1]))
        if attn_mask is not None:
            weights = torch.baddbmm(attn_mask, q_scaled, k.transpose(-2, -1))
        else:
            weights = torch.bmm(q_scaled, k.transpose(-2, -1))
        weights = F.softmax(weights, dim=-1)
        if dropout_p > 0.0:
            weights = F.dropout(weights, p=dropout_p)
        output = torch.bmm(weights, v).transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
        output = F.linear(output, out_proj_weight, out_proj_bias).view(tgt_len, bsz, -1)
        weights = weights.view(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            weights = weights.mean(dim=1)
        if not is_batched:
            output, weights = output.squeeze(1), weights.squeeze(0)
        return output, weights
    if attn_mask is not None:
        single = attn_mask.shape[0] == 1 and attn_mask.ndim == 3
        attn_mask = attn_mask.unsqueeze(0) if single else attn_mask.view(bsz, num_heads, -1, src_len)
    q = q.view(bsz, num_heads, tgt_len, head_dim)
    k = k.view(bsz, num_heads, src_len, head_dim)
    v = v.view(bsz, num_heads, src_len, head_dim)
    output = F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    output = output.permute(2, 0, 1, 3).reshape(bsz * tgt_len, embed_dim)
    output = F.linear(output, out_proj_weight, out_proj_bias).view(tgt_len, bsz, -1)
    return (output if is_batched else output.squeeze(1)), None
