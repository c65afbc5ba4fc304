"""Attention under autodiff: the forward that keeps its softmax statistics, and its VJP rule.

`autodiff.joint` rewrites each forward line in `FORWARD_REWRITES` that gradients flow through
before it differentiates: `prims.sdpa` becomes `prims.sdpa_forward`, which also returns the
logsumexp of the scores, so the backward (`prims.sdpa_backward`) runs torch's fused attention
backward on the saved output and logsumexp without running attention's forward again. Inference
keeps the plain `prims.sdpa`. A float mask that requires grad is the exception: no fused kernel
returns its gradient, so that attention is written out in prims (scores, softmax, matmul) and
differentiated by their rules, as eager's math backend does.

`RESIDUALS` names the prims whose outputs after the first are residuals for their backward: they
carry no cotangent.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

import torch

from compiler import prims
from compiler.core.ir import BoundSymbol, TensorProxy, same_size
from compiler.ops.grouped_query import kv_groups, repeat_kv_heads
from compiler.ops.reductions import expand_reduced, stable_shift
from compiler.passes.vjp_structural import Cotangents, transpose
from compiler.prims import Prim

RESIDUALS = frozenset({Prim.SDPA_FORWARD})


def _attention_with_statistics(bsym: BoundSymbol, live: Collection[str]) -> TensorProxy:
    q, k, v, attn_mask, is_causal, scale = bsym.args
    if isinstance(attn_mask, TensorProxy) and attn_mask.name in live:
        return attention_in_prims(q, k, v, attn_mask, scale)
    out, _ = prims.sdpa_forward(q, k, v, attn_mask, is_causal, scale)
    return out


def attention_in_prims(
    q: TensorProxy, k: TensorProxy, v: TensorProxy, mask: TensorProxy, scale: float | None
) -> TensorProxy:
    """softmax(q k^T * scale + mask) v in float32 prims, for a float `mask` (no causal masking);
    k and v with fewer heads than q (grouped-query attention) are repeated for each group."""
    rank, dtype = q.ndim, q.dtype
    if rank >= 3 and not same_size(k.shape[-3], q.shape[-3]):
        heads = q.shape[-3]
        groups = kv_groups(q, k)
        k, v = repeat_kv_heads(k, heads, groups), repeat_kv_heads(v, heads, groups)
    q32, k32, v32, mask32 = (_float32(t) for t in (q, k, v, mask))
    scores = prims.matmul(q32, transpose(k32))
    scores = prims.mul(scores, q.shape[-1] ** -0.5 if scale is None else scale)
    shape = list(scores.shape)
    scores = prims.add(scores, prims.broadcast_in_dim(mask32, shape, list(range(rank - mask.ndim, rank))))
    peak = expand_reduced(stable_shift(scores, (rank - 1,)), shape, (rank - 1,))
    exps = prims.exp(prims.sub(scores, peak))
    weights = prims.div(exps, expand_reduced(prims.sum(exps, (rank - 1,)), shape, (rank - 1,)))
    out = prims.matmul(weights, v32)
    return out if dtype == torch.float32 else prims.convert_element_type(out, dtype)


def _float32(t: TensorProxy) -> TensorProxy:
    return t if t.dtype == torch.float32 else prims.convert_element_type(t, torch.float32)


def _sdpa_forward(bsym: BoundSymbol, g: TensorProxy) -> Cotangents:
    q, k, v, attn_mask, is_causal, scale = bsym.args
    out, logsumexp = bsym.output
    dq, dk, dv = prims.sdpa_backward(g, q, k, v, attn_mask, is_causal, scale, out, logsumexp)
    return [(q, dq), (k, dk), (v, dv)]


# prim -> rewrite(bsym, names of the values gradients flow through): records the prims that compute
# the line's output for differentiation and returns the proxy that stands for that output.
FORWARD_REWRITES: dict[Prim, Callable[[BoundSymbol, Collection[str]], TensorProxy]] = {
    Prim.SDPA: _attention_with_statistics,
}
ATTENTION_RULES = {Prim.SDPA_FORWARD: _sdpa_forward}
