"""Attention with dropout (`F.scaled_dot_product_attention(..., dropout_p > 0)`), as prims: eager's
math path (the one PyTorch takes on the CPU when dropout is on), so a seeded program drops the
same attention weights compiled as eager.

Eager's math path computes in float32 for half and bfloat16 inputs, scales q and k by
sqrt(scale) each, adds the mask (causal: -inf above the diagonal; bool: -inf where False), takes
a softmax that gives 0 (not NaN) on rows masked entirely, multiplies by dropout noise drawn like
`F.dropout` draws it (`prims.dropout_noise`: the same generator calls), and multiplies by v. On
CUDA eager runs fused kernels with their own random stream: values then differ from eager, their
distribution does not.
"""

from __future__ import annotations

import math

import torch

from compiler import prims
from compiler.core.ir import TensorProxy
from compiler.ops.linalg import _matmul
from compiler.ops.masks import additive_mask, tril
from compiler.ops.operands import broadcast_to, to_dtype
from compiler.ops.reductions import expand_reduced, stable_shift


def _safe_softmax(scores: TensorProxy) -> TensorProxy:
    """softmax over the last dim; a row of -inf only gives zeros, and zero gradients (its sum of
    exps, 0, is divided by as 1: 0 / 0 would make the gradients NaN through the `where`)."""
    last = (scores.ndim - 1,)
    top = expand_reduced(stable_shift(scores, last), scores.shape, last)
    masked_row = prims.eq(top, -math.inf)
    exps = prims.exp(prims.sub(scores, prims.where(masked_row, 0.0, top)))
    total = expand_reduced(prims.sum(exps, last), scores.shape, last)
    return prims.where(masked_row, 0.0, prims.div(exps, prims.where(masked_row, 1.0, total)))


def attention_with_dropout(
    query: TensorProxy,
    key: TensorProxy,
    value: TensorProxy,
    attn_mask: TensorProxy | None,
    dropout_p: float,
    is_causal: bool,
    scale: float | None,
) -> TensorProxy:
    """softmax(q k^T * scale + mask) * dropout noise @ v, as eager's math path computes it."""
    compute = torch.float32 if query.dtype in (torch.float16, torch.bfloat16) else query.dtype
    q, k, v = (to_dtype(t, compute) for t in (query, key, value))
    factor = math.sqrt(scale if scale is not None else 1.0 / math.sqrt(query.shape[-1]))
    k_t = prims.permute(k, [*range(k.ndim - 2), k.ndim - 1, k.ndim - 2])
    scores = _matmul(prims.mul(q, factor), prims.mul(k_t, factor))
    rows, cols = scores.shape[-2], scores.shape[-1]
    if is_causal:
        attn_mask = tril(prims.full([rows, cols], True, torch.bool, query.device))
    if attn_mask is not None:
        scores = prims.add(scores, broadcast_to(additive_mask(attn_mask, compute), scores.shape))
    weights = _safe_softmax(scores)
    if dropout_p >= 1.0:
        weights = prims.mul(weights, 0.0)
    else:
        weights = prims.mul(weights, prims.dropout_noise(list(weights.shape), float(dropout_p), compute, query.device))
    return to_dtype(_matmul(weights, v), query.dtype)
