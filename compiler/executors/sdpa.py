"""The sdpa executor: runs `prims.sdpa` on CUDA with torch's fused attention kernels.

It claims attention so the fusion pass never puts it into an nvFuser region, and calls
`F.scaled_dot_product_attention`, which picks the fastest backend for the inputs (cuDNN,
FlashAttention, memory-efficient). NOTE: calling FlashAttention directly would skip that choice,
and the backend torch picks can be the faster one (a bf16 KV-cache prefill). Attention that gradients
flow through runs `attention.py`'s forward (which keeps the softmax statistics) and fused backward.
On CPU it declines, and the torch executor runs attention.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from compiler.core.executor import Executor
from compiler.core.ir import BoundSymbol
from compiler.executors.attention import (
    RememberedAtSite,
    attention,
    attention_backend,
    attention_backward,
    attention_forward,
    torch_choice,
)
from compiler.prims import Prim

_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


class SdpaExecutor(Executor):
    """Claims attention (`prims.sdpa`, `prims.sdpa_forward`, `prims.sdpa_backward`) on CUDA tensors of a
    floating dtype."""

    name = "sdpa"

    def implementation(self, bsym: BoundSymbol) -> Callable | None:
        """For attention on CUDA, `attention` (torch's fused kernels; k and v may have fewer heads
        than q), `attention_forward` or `attention_backward`, each with its own memo of torch's
        choice (`RememberedAtSite`); None otherwise."""
        if bsym.sym not in _IMPLS:
            return None
        q = bsym.args[1] if bsym.sym is Prim.SDPA_BACKWARD else bsym.args[0]
        if q.device.type != "cuda" or q.dtype not in _DTYPES:
            return None
        impl, keyword, answer = _IMPLS[bsym.sym]
        return functools.partial(impl, **{keyword: RememberedAtSite(answer)})


# prim -> (implementation, the keyword taking its per-call-site memo, what that memo remembers)
_IMPLS = {
    Prim.SDPA: (attention, "choice", torch_choice),
    Prim.SDPA_FORWARD: (attention_forward, "backend_of", attention_backend),
    Prim.SDPA_BACKWARD: (attention_backward, "backend_of", attention_backend),
}
