"""Grouped-query attention: `scaled_dot_product_attention(..., enable_gqa=True)` with fewer key/value
heads than query heads, without copying keys and values where the rows allow it.

Key/value head j serves query heads j*g .. j*g + g - 1 (g = heads // kv heads), as torch's
`repeat_interleave` has it. Where every query row attends on its own (no causal mask, no dropout,
a mask the same for every head and every row: a decode step's `positions <= t`), a group's g
query heads are the rows of ONE attention with their key/value head:

    q (..., heads, rows, d) -> (..., kv heads, g * rows, d)     # a view when rows == 1 (decode)
    attention(q, k, v)      -> (..., kv heads, g * rows, dv) -> (..., heads, rows, dv)

so keys and values are read once per group. Otherwise (a causal mask, a mask that differs by row
or head) the attention prim takes keys and values with their own heads: its executors run torch's
kernels that read one key/value head for each group of query heads (cuDNN and FlashAttention do,
`executors/attention.py`) and repeat the heads at run time only for a kernel that cannot. With
dropout (attention in prims) each key/value head is repeated g times in the trace, which copies
keys and values into g times their size before the attention reads them.
"""

from __future__ import annotations

from compiler import prims
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy, same_size
from compiler.core.proxies import size_product


def kv_groups(query: TensorProxy, key: TensorProxy) -> int:
    """How many query heads share each key/value head (a ValueError naming both counts if none)."""
    heads, kv_heads = query.shape[-3], key.shape[-3]
    check(
        heads % kv_heads == 0,
        lambda: (
            f"scaled_dot_product_attention: with enable_gqa the query heads ({heads}) must be a multiple of "
            f"the key/value heads ({kv_heads}){called_at()}"
        ),
        ValueError,
    )
    return heads // kv_heads


def rows_attend_alone(attn_mask: TensorProxy | None, is_causal: bool, dropout_p: float) -> bool:
    """Whether a group's query heads can be one attention's rows: no causal mask, no dropout, and
    a mask (if any) of size 1 along heads and rows."""
    if is_causal or dropout_p > 0.0:
        return False
    if attn_mask is None:
        return True
    shape = attn_mask.shape
    return (len(shape) < 2 or same_size(shape[-2], 1)) and (len(shape) < 3 or same_size(shape[-3], 1))


def fold_groups(query: TensorProxy, kv_heads: int, groups: int) -> TensorProxy:
    """q (..., heads, rows, d) as (..., kv heads, groups * rows, d): each group's query heads as the
    rows of one attention with its key/value head (see the module)."""
    *batch, _, rows, dim = query.shape
    return prims.reshape(query, [*batch, kv_heads, size_product([groups, rows]), dim])


def unfold_groups(out: TensorProxy, heads: int, rows: int) -> TensorProxy:
    """The folded attention's (..., kv heads, groups * rows, dv) as (..., heads, rows, dv)."""
    return prims.reshape(out, [*out.shape[:-3], heads, rows, out.shape[-1]])


def repeat_kv_heads(kv: TensorProxy, heads: int, groups: int) -> TensorProxy:
    """Each key/value head repeated for the `groups` of the `heads` query heads it serves (a copy)."""
    d = kv.ndim - 3
    expanded = [*kv.shape[: d + 1], groups, *kv.shape[d + 1 :]]
    out = prims.broadcast_in_dim(kv, expanded, [i for i in range(len(expanded)) if i != d + 1])
    return prims.reshape(out, [*kv.shape[:d], heads, *kv.shape[d + 1 :]])
