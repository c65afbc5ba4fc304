"""The sdpa executor: runs `prims.sdpa` on CUDA with torch's fused attention kernels.

It claims attention so the fusion pass never puts it into an nvFuser region. When the inputs
suit FlashAttention (4-D, bf16/fp16, no mask, head dim a multiple of 8 up to 256, unit stride
in the last dim, no causal mask over unequal lengths), it calls
`aten._scaled_dot_product_flash_attention` directly, skipping the backend selection of
`F.scaled_dot_product_attention`; otherwise that function picks the kernel. On CPU it declines,
and the torch executor runs attention.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from compiler.ir import BoundSymbol
from compiler.prims import Prim

_FLASH_DTYPES = (torch.float16, torch.bfloat16)
_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def flash_eligible(q: Any, k: Any, v: Any, attn_mask: Any, is_causal: bool) -> bool:
    """Whether FlashAttention computes exactly what F.scaled_dot_product_attention would."""
    if attn_mask is not None or q.dtype not in _FLASH_DTYPES or q.dim() != 4:
        return False
    head_dim = q.shape[-1]
    if head_dim % 8 or head_dim > 256 or k.shape[-1] != head_dim or v.shape[-1] != head_dim:
        return False
    if q.shape[:2] != k.shape[:2] or k.shape[:3] != v.shape[:3]:
        return False
    if is_causal and q.shape[2] != k.shape[2]:
        return False  # NOTE: torch's causal mask is top-left aligned; flash aligns bottom-right.
    return all(t.stride(-1) == 1 for t in (q, k, v))


def fused_attention(q: Any, k: Any, v: Any, attn_mask: Any, is_causal: bool, scale: Any) -> torch.Tensor:
    """Attention through torch's fused kernels (FlashAttention directly when eligible)."""
    if flash_eligible(q, k, v, attn_mask, is_causal):
        return torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, is_causal, False, scale=scale)[0]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=is_causal, scale=scale)


class SdpaExecutor:
    """Claims `prims.sdpa` on CUDA tensors of a floating dtype."""

    name = "sdpa"

    def implementation(self, bsym: BoundSymbol) -> Callable | None:
        """`fused_attention` for attention on CUDA, None otherwise."""
        if bsym.sym is not Prim.SDPA:
            return None
        q = bsym.args[0]
        if q.device.type != "cuda" or q.dtype not in _DTYPES:
            return None
        return fused_attention
