"""Neural-network ops: attention (more to come: softmax, norms, losses, linear, matmul)."""

from __future__ import annotations

from typing import Any

import torch

from compiler import dtypes, prims
from compiler.errors import called_at, check
from compiler.ir import TensorProxy
from compiler.ops import register


@register("torch.nn.functional.scaled_dot_product_attention")
def scaled_dot_product_attention(
    query: TensorProxy,
    key: TensorProxy,
    value: TensorProxy,
    attn_mask: TensorProxy | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Any:
    check(
        dropout_p == 0.0,
        lambda: f"scaled_dot_product_attention: dropout_p={dropout_p} is not supported (only 0.0){called_at()}",
        NotImplementedError,
    )
    check(
        not enable_gqa,
        lambda: f"scaled_dot_product_attention: enable_gqa is not supported{called_at()}",
        NotImplementedError,
    )
    check(
        query.dtype == key.dtype == value.dtype and dtypes.is_float(query.dtype),
        lambda: (
            f"scaled_dot_product_attention: query, key and value must share a floating dtype, got "
            f"{query.dtype}, {key.dtype}, {value.dtype}{called_at()}"
        ),
        TypeError,
    )
    check(
        attn_mask is None or not is_causal,
        lambda: f"scaled_dot_product_attention: attn_mask and is_causal=True cannot be combined{called_at()}",
        ValueError,
    )
    if attn_mask is not None:
        check(
            isinstance(attn_mask, TensorProxy) and (attn_mask.dtype == torch.bool or attn_mask.dtype == query.dtype),
            lambda: f"scaled_dot_product_attention: attn_mask must be bool or {query.dtype}{called_at()}",
            TypeError,
        )
    return prims.sdpa(query, key, value, attn_mask, bool(is_causal), scale)
