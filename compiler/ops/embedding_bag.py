"""`F.embedding_bag` / `nn.EmbeddingBag`: the rows of a table summed, averaged or maxed per bag.

Every index of the input gets the number of its bag: a 2-D input's row, or for a 1-D input with
`offsets` the number of bag starts at or before its position, less one (computed from the offsets
while the program runs: a compare against each start, summed). The rows are gathered
(`index_select`, whose gradient adds them back into the table) and reduced per bag: "sum" and
"mean" add them with one `index_add` (bf16/f16 in float32, rounded once), "mean" divides by the bag's
count, "max" is a `scatter_reduce` "amax" (its gradient shared among equal maxima: random rows
have none). An index equal to `padding_idx` takes no part in its bag (nor in its count), and an
empty bag gives zeros, as in eager. `per_sample_weights` (with "sum") scale each row and get their
gradient too. With `include_last_offset` the last offset ends the last bag.
"""

from __future__ import annotations

from typing import Any

import torch

from compiler import prims
from compiler.core import dtypes
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy, size_product
from compiler.ops.operands import to_dtype
from compiler.ops.registry import register

_NAME = "F.embedding_bag"


def _check_arguments(
    input: Any, weight: Any, offsets: Any, mode: str, per_sample_weights: Any, include_last_offset: bool
) -> None:
    check(
        isinstance(weight, TensorProxy) and weight.ndim == 2 and dtypes.is_float(weight.dtype),
        lambda: f"{_NAME}: weight must be a 2-D float tensor, got {weight!r}{called_at()}",
        ValueError,
    )
    check(
        isinstance(input, TensorProxy) and input.ndim in (1, 2) and input.dtype in (torch.int32, torch.int64),
        lambda: f"{_NAME}: input must be a 1-D or 2-D int32 or int64 tensor, got {input!r}{called_at()}",
        TypeError,
    )
    check(
        mode in ("sum", "mean", "max"),
        lambda: f"{_NAME}: mode must be 'sum', 'mean' or 'max', got {mode!r}{called_at()}",
        ValueError,
    )
    if input.ndim == 2:
        check(
            offsets is None and not include_last_offset,
            lambda: f"{_NAME}: a 2-D input holds one bag per row; offsets must be None{called_at()}",
            ValueError,
        )
    else:
        check(
            isinstance(offsets, TensorProxy) and offsets.ndim == 1 and offsets.dtype == input.dtype,
            lambda: f"{_NAME}: a 1-D input needs 1-D offsets of its dtype {input.dtype}, got {offsets!r}{called_at()}",
            ValueError,
        )
    check(
        per_sample_weights is None or mode == "sum",
        lambda: f"{_NAME}: per_sample_weights is only supported with mode='sum', got mode={mode!r}{called_at()}",
        NotImplementedError,
    )
    check(
        per_sample_weights is None
        or (
            isinstance(per_sample_weights, TensorProxy)
            and per_sample_weights.dtype == weight.dtype
            and tuple(per_sample_weights.shape) == tuple(input.shape)
        ),
        lambda: f"{_NAME}: per_sample_weights must be a {weight.dtype} tensor of the input's shape{called_at()}",
        ValueError,
    )


def _bags_of_positions(input: TensorProxy, offsets: Any, include_last_offset: bool) -> tuple[Any, TensorProxy, Any]:
    """(number of bags, each flattened index's bag number as int64, whether it belongs to a bag:
    a bool tensor, or None where every index does)."""
    device = input.device
    if input.ndim == 2:
        bags, length = input.shape
        rows = prims.iota(bags, 0, 1, torch.int64, device)
        return bags, prims.reshape(prims.broadcast_in_dim(rows, [bags, length], [0]), [bags * length]), None
    length = input.shape[0]
    offsets = to_dtype(offsets, torch.int64)
    starts = offsets
    if include_last_offset:
        check(
            offsets.shape[0] >= 1,
            lambda: f"{_NAME}: include_last_offset needs at least one offset{called_at()}",
            ValueError,
        )
        starts = prims.slice(offsets, [0], [offsets.shape[0] - 1], [1])
    bags = starts.shape[0]
    positions = prims.iota(length, 0, 1, torch.int64, device)
    grid = [length, bags]
    started = prims.ge(prims.broadcast_in_dim(positions, grid, [0]), prims.broadcast_in_dim(starts, grid, [1]))
    bag = prims.sub(prims.sum(prims.convert_element_type(started, torch.int64), (1,)), 1)
    inside = prims.ge(bag, 0)
    if include_last_offset:
        end = prims.broadcast_in_dim(prims.slice(offsets, [bags], [bags + 1], [1]), [length], [0])
        inside = prims.bitwise_and(inside, prims.lt(positions, end))
    return bags, prims.maximum(bag, prims.full([length], 0, torch.int64, device)), inside


@register("torch.nn.functional.embedding_bag")
def embedding_bag(
    input: TensorProxy,
    weight: TensorProxy,
    offsets: Any = None,
    max_norm: Any = None,
    norm_type: float = 2,
    scale_grad_by_freq: bool = False,
    mode: str = "mean",
    sparse: bool = False,
    per_sample_weights: Any = None,
    include_last_offset: bool = False,
    padding_idx: int | None = None,
) -> TensorProxy:
    """One row per bag: the bag's rows of `weight` reduced by `mode` (see the module)."""
    for name, value, default in (("max_norm", max_norm, None), ("scale_grad_by_freq", scale_grad_by_freq, False)):
        check(
            value == default,
            lambda name=name: f"{_NAME}: {name} is not supported{called_at()}",
            NotImplementedError,
        )
    check(not sparse, lambda: f"{_NAME}: sparse=True is not supported{called_at()}", NotImplementedError)
    _check_arguments(input, weight, offsets, mode, per_sample_weights, include_last_offset)
    bags, bag, keep = _bags_of_positions(input, offsets, include_last_offset)
    count, width = size_product(input.shape), weight.shape[1]
    flat = prims.reshape(input, [count]) if input.ndim != 1 else input
    if padding_idx is not None:
        padding_idx = padding_idx + weight.shape[0] if padding_idx < 0 else padding_idx
        kept = prims.ne(flat, padding_idx)
        keep = kept if keep is None else prims.bitwise_and(keep, kept)
    rows = prims.index_select(weight, 0, flat)
    device = weight.device
    if mode == "max":
        if keep is not None:
            lowest_rows = prims.full([count, width], float("-inf"), weight.dtype, device)
            rows = prims.where(prims.broadcast_in_dim(keep, [count, width], [0]), rows, lowest_rows)
        index = prims.broadcast_in_dim(bag, [count, width], [0])
        start = prims.full([bags, width], float("-inf"), weight.dtype, device)
        maxima = prims.scatter_reduce(start, 0, index, rows, "amax", True)
        filled = prims.gt(maxima, float("-inf"))  # NOTE: an empty bag (all -inf) gives zeros, as eager's
        return prims.where(filled, maxima, prims.full([bags, width], 0, weight.dtype, device))
    compute = torch.float32 if weight.dtype in (torch.bfloat16, torch.float16) else weight.dtype
    rows = to_dtype(rows, compute)
    scale = None if keep is None else prims.convert_element_type(keep, compute)
    if per_sample_weights is not None:
        weights = to_dtype(prims.reshape(per_sample_weights, [count]), compute)
        scale = weights if scale is None else prims.mul(scale, weights)
    if scale is not None:
        rows = prims.mul(rows, prims.broadcast_in_dim(scale, [count, width], [0]))
    sums = prims.index_add(prims.full([bags, width], 0, compute, device), 0, bag, rows)
    if mode == "mean":
        members = scale if scale is not None else prims.full([count], 1, compute, device)
        sizes = prims.index_add(prims.full([bags], 0, compute, device), 0, bag, members)
        sizes = prims.maximum(sizes, prims.full([bags], 1, compute, device))
        sums = prims.div(sums, prims.broadcast_in_dim(sizes, [bags, width], [0]))
    return to_dtype(sums, weight.dtype)
