"""Meta functions of the matrix and attention prims (matmul, linear, sdpa and its forward and
backward with statistics); `meta.META` includes `LINALG_META`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from compiler.core.errors import check
from compiler.core.ir import TensorProxy, same_size
from compiler.prims.meta_checks import check_same_shape
from compiler.prims.prim import Prim


def _matmul_meta(a: TensorProxy, b: TensorProxy) -> TensorProxy:
    check(
        a.ndim >= 2 and a.ndim == b.ndim,
        lambda: f"prims.matmul: {a.name} and {b.name} need the same rank >= 2",
        ValueError,
    )
    check(
        a.dtype == b.dtype,
        lambda: f"prims.matmul: {a.name} is {a.dtype} but {b.name} is {b.dtype}",
        TypeError,
    )
    for i in range(a.ndim - 2):
        check(
            same_size(a.shape[i], b.shape[i]),
            lambda: f"prims.matmul: batch dims of {a.name} and {b.name} differ",
            ValueError,
        )
    check(
        same_size(a.shape[-1], b.shape[-2]),
        lambda: f"prims.matmul: {a.name} {a.shape} @ {b.name} {b.shape}: inner sizes differ",
        ValueError,
    )
    return TensorProxy((*a.shape[:-1], b.shape[-1]), a.dtype, a.device)


def _linear_meta(a: TensorProxy, w: TensorProxy, bias: TensorProxy | None) -> TensorProxy:
    check(
        w.ndim == 2 and same_size(a.shape[-1], w.shape[1]),
        lambda: f"prims.linear: {a.name} {a.shape} does not match weight {w.name} {w.shape}",
        ValueError,
    )
    check(
        a.dtype == w.dtype and (bias is None or bias.dtype == a.dtype),
        lambda: "prims.linear: operands must share a dtype",
        TypeError,
    )
    return TensorProxy((*a.shape[:-1], w.shape[0]), a.dtype, a.device)


def _sdpa_meta(
    q: TensorProxy, k: TensorProxy, v: TensorProxy, attn_mask: Any, is_causal: bool, scale: Any
) -> TensorProxy:
    check(
        q.ndim >= 2 and k.ndim == q.ndim and v.ndim == q.ndim,
        lambda: "prims.sdpa: q, k, v must share a rank >= 2",
        ValueError,
    )
    check(q.dtype == k.dtype == v.dtype, lambda: "prims.sdpa: q, k, v must share a dtype", TypeError)
    if q.ndim >= 3:
        heads, kv_heads = q.shape[-3], k.shape[-3]
        check(
            same_size(kv_heads, v.shape[-3]) and (same_size(heads, kv_heads) or _divides(kv_heads, heads)),
            lambda: (
                f"prims.sdpa: q's heads ({heads}) must be k's and v's ({kv_heads}, {v.shape[-3]}) "
                "or a multiple of them (grouped-query attention)"
            ),
            ValueError,
        )
    return TensorProxy((*q.shape[:-1], v.shape[-1]), q.dtype, q.device)


def _divides(a: Any, b: Any) -> bool:
    """Whether size a divides size b (assumed where either is symbolic: the frontend checked it)."""
    if not (isinstance(a, int) and isinstance(b, int)):
        return True
    return a > 0 and b % a == 0


def _sdpa_forward_meta(
    q: TensorProxy, k: TensorProxy, v: TensorProxy, attn_mask: Any, is_causal: bool, scale: Any
) -> tuple[TensorProxy, TensorProxy]:
    output = _sdpa_meta(q, k, v, attn_mask, is_causal, scale)
    return output, TensorProxy(q.shape[:-1], torch.float32, q.device)


def _sdpa_backward_meta(
    grad: TensorProxy,
    q: TensorProxy,
    k: TensorProxy,
    v: TensorProxy,
    attn_mask: Any,
    is_causal: bool,
    scale: Any,
    out: TensorProxy,
    logsumexp: TensorProxy,
) -> tuple[TensorProxy, TensorProxy, TensorProxy]:
    output = _sdpa_meta(q, k, v, attn_mask, is_causal, scale)
    check_same_shape(Prim.SDPA_BACKWARD, [output, grad, out])
    check(
        logsumexp.dtype == torch.float32
        and len(logsumexp.shape) == q.ndim - 1
        and all(same_size(a, b) for a, b in zip(logsumexp.shape, q.shape)),
        lambda: (
            f"prims.sdpa_backward: logsumexp {logsumexp.name} is {logsumexp.type_string()}, "
            f"expected float32 of shape {list(q.shape[:-1])}"
        ),
        ValueError,
    )
    return tuple(TensorProxy(t.shape, t.dtype, t.device) for t in (q, k, v))


LINALG_META: dict[Prim, Callable] = {
    Prim.MATMUL: _matmul_meta,
    Prim.LINEAR: _linear_meta,
    Prim.SDPA: _sdpa_meta,
    Prim.SDPA_FORWARD: _sdpa_forward_meta,
    Prim.SDPA_BACKWARD: _sdpa_backward_meta,
}
