"""Masks: triu and tril, as `where` over a comparison of row and column indices; attention's bool
masks as the additive masks attention kernels take."""

from __future__ import annotations

import math
from typing import Any

import torch

from compiler import prims
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy
from compiler.ops.operands import broadcast_to, to_dtype
from compiler.ops.registry import register


def _triangle(op: str, input: TensorProxy, diagonal: int, keep_upper: bool) -> TensorProxy:
    check(
        isinstance(input, TensorProxy) and input.ndim >= 2,
        lambda: f"{op}: expected a tensor of at least 2 dims, got {getattr(input, 'shape', input)!r}{called_at()}",
        ValueError,
    )
    rows, cols = input.shape[-2], input.shape[-1]
    row = prims.broadcast_in_dim(prims.iota(rows, 0, 1, torch.int64, input.device), [rows, cols], [0])
    col = prims.broadcast_in_dim(prims.iota(cols, 0, 1, torch.int64, input.device), [rows, cols], [1])
    offset = prims.sub(col, row)  # element (i, j) is on diagonal j - i
    keep = prims.ge(offset, diagonal) if keep_upper else prims.le(offset, diagonal)
    keep = broadcast_to(keep, input.shape)
    zero = False if input.dtype == torch.bool else 0
    return prims.where(keep, input, zero)


@register("torch.triu", "torch.Tensor.triu")
def triu(input: TensorProxy, diagonal: int = 0, *, out: Any = None) -> Any:
    """The elements on and above the `diagonal`-th diagonal; the others are zero."""
    check(out is None, lambda: f"torch.triu: out= is not supported{called_at()}", NotImplementedError)
    return _triangle("triu", input, diagonal, keep_upper=True)


@register("torch.tril", "torch.Tensor.tril")
def tril(input: TensorProxy, diagonal: int = 0, *, out: Any = None) -> Any:
    """The elements on and below the `diagonal`-th diagonal; the others are zero."""
    check(out is None, lambda: f"torch.tril: out= is not supported{called_at()}", NotImplementedError)
    return _triangle("tril", input, diagonal, keep_upper=False)


def additive_mask(mask: TensorProxy, dtype: torch.dtype) -> TensorProxy:
    """A bool attention mask (True: attend) as 0 / -inf in `dtype`; a float mask converted to `dtype`.

    This is the conversion `F.scaled_dot_product_attention` does itself on each call for a bool
    mask (outside cuDNN, which takes -65504 for -inf in some torch releases; the two agree wherever
    a row keeps one key).
    """
    if mask.dtype != torch.bool:
        return to_dtype(mask, dtype)
    return prims.where(mask, prims.full(list(mask.shape), 0.0, dtype, mask.device), -math.inf)
