"""The sdpa executor: runs `prims.sdpa` on CUDA with torch's fused attention kernels.

It claims attention so the fusion pass never puts it into an nvFuser region, and calls
`F.scaled_dot_product_attention`, which picks the fastest backend for the inputs (cuDNN,
FlashAttention, memory-efficient). NOTE: calling FlashAttention directly would skip that choice,
and the backend torch picks can be the faster one (a bf16 KV-cache prefill). Attention that gradients
flow through runs `attention.py`'s forward (which keeps the softmax statistics) and fused backward.
On CPU it declines, and the torch executor runs attention.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from compiler.core.executor import Executor
from compiler.core.ir import BoundSymbol
from compiler.executors.attention import attention, attention_backward, attention_forward
from compiler.prims import Prim

_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def fused_attention(q: Any, k: Any, v: Any, attn_mask: Any, is_causal: bool, scale: Any) -> torch.Tensor:
    """Attention through torch's fused kernels (torch chooses the backend; k and v may have fewer
    heads than q)."""
    return attention(q, k, v, attn_mask, is_causal, scale)


class SdpaExecutor(Executor):
    """Claims attention (`prims.sdpa`, `prims.sdpa_forward`, `prims.sdpa_backward`) on CUDA tensors of a
    floating dtype."""

    name = "sdpa"

    def implementation(self, bsym: BoundSymbol) -> Callable | None:
        """`fused_attention` (or its backward) for attention on CUDA, None otherwise."""
        if bsym.sym not in _IMPLS:
            return None
        q = bsym.args[1] if bsym.sym is Prim.SDPA_BACKWARD else bsym.args[0]
        if q.device.type != "cuda" or q.dtype not in _DTYPES:
            return None
        return _IMPLS[bsym.sym]


_IMPLS = {Prim.SDPA: fused_attention, Prim.SDPA_FORWARD: attention_forward, Prim.SDPA_BACKWARD: attention_backward}
