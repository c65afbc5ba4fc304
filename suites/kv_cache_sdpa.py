"""Attention with an in-place KV-cache update, as in a decoder's decode and prefill steps.

The new keys and values of `new` tokens are written into the caches at their positions with
`index_copy_`, then the queries of the new tokens attend over the whole cache with
F.scaled_dot_product_attention (no mask: the benchmark keeps the cache full). The shape parameter
is (batch, heads, cache length, head dim, new tokens): decode writes 1 token, prefill 512.

Bytes: the caches read once except the rows being replaced, the new keys, values and queries
read, the new rows written into both caches, the output written, and the int64 positions read:
element size x batch x heads x head dim x (2 x cache + 4 x new) + 8 x new.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from fusebench.cases import Case, Params, dtype_named, generator, random_tensor
from fusebench.integrations.asv_adapter import asv_benchmarks


def kv_cache_attention(
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    positions: torch.Tensor,
    k_new: torch.Tensor,
    v_new: torch.Tensor,
    q: torch.Tensor,
) -> torch.Tensor:
    """Writes the new keys and values into the caches (in place) and attends over the caches."""
    k_cache.index_copy_(2, positions, k_new)
    v_cache.index_copy_(2, positions, v_new)
    return F.scaled_dot_product_attention(q, k_cache, v_cache)


def _inputs(params: Params, device: torch.device, seed: int) -> tuple:
    batch, heads, cache, head_dim, new = params["shape"]
    dtype = dtype_named(params["dtype"])
    gen = generator(seed)
    k_cache = random_tensor((batch, heads, cache, head_dim), dtype, device, gen)
    v_cache = random_tensor((batch, heads, cache, head_dim), dtype, device, gen)
    positions = torch.arange(cache - new, cache, device=device)
    k_new, v_new, q = (random_tensor((batch, heads, new, head_dim), dtype, device, gen) for _ in range(3))
    return k_cache, v_cache, positions, k_new, v_new, q


def _bytes(params: Params) -> int:
    batch, heads, cache, head_dim, new = params["shape"]
    element = dtype_named(params["dtype"]).itemsize
    return element * batch * heads * head_dim * (2 * cache + 4 * new) + 8 * new


CASES = [
    Case(
        name="kv_cache_sdpa",
        fn=kv_cache_attention,
        make_inputs=_inputs,
        bytes_moved=_bytes,
        params={"shape": [(4, 32, 2048, 128, 1), (4, 32, 2048, 128, 512)], "dtype": ["bfloat16"]},
        quick_params={"shape": [(1, 4, 256, 64, 1), (1, 4, 256, 64, 32)], "dtype": ["bfloat16"]},
        mutated_args=(0, 1),
        tolerances={torch.bfloat16: (1.6e-2, 2e-3)},
        description="index_copy_ into K and V caches, then SDPA over the caches (decode and prefill)",
    )
]

# ASV sees each case as benchmarks '<suite>.<case>.<metric>' (fusebench/integrations/asv_adapter.py).
globals().update(asv_benchmarks(__name__, CASES))
