"""torch.searchsorted and torch.bucketize as sums of comparisons, which are exact.

For sorted boundaries b and a value v, the left insertion point is how many b are not >= v, the right
one how many are not > v: as eager's binary search, a NaN value lands after every boundary. Each value
is compared with every boundary of its row ([..., K, M] comparisons), so this suits the few
boundaries of a bucketing, not long sorted sequences.
"""

from __future__ import annotations

from typing import Any

import torch

from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy
from compiler.ops.registry import register


def _insertion_points(boundaries: TensorProxy, values: Any, right: bool, out_int32: bool) -> TensorProxy:
    """For each value, how many boundaries of its row lie before it (ties before it when `right`)."""
    if isinstance(values, TensorProxy) and values.ndim > 0:
        values = values.unsqueeze(-1)
        if boundaries.ndim > 1:
            boundaries = boundaries.unsqueeze(-2)
    before = (boundaries > values) if right else (boundaries >= values)
    return before.logical_not().sum(-1, dtype=torch.int32 if out_int32 else torch.int64)


def _side(right: bool, side: str | None) -> bool:
    check(
        side in (None, "left", "right"),
        lambda: f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}{called_at()}",
        RuntimeError,
    )
    check(
        not (right and side == "left"),
        lambda: (
            f"torch.searchsorted(): side and right can't be set to opposites, got side of left while right "
            f"was True{called_at()}"
        ),
        RuntimeError,
    )
    return right or side == "right"


@register("torch.searchsorted")
def searchsorted(
    sorted_sequence: TensorProxy,
    input: Any,
    *,
    out_int32: bool = False,
    right: bool = False,
    side: str | None = None,
    out: Any = None,
    sorter: TensorProxy | None = None,
) -> TensorProxy:
    """The indices at which `input`'s values would be inserted into the last dim of `sorted_sequence`
    (its leading dims matching `input`'s, or 1-D) to keep it sorted; `sorter` sorts it first."""
    check(out is None, lambda: f"torch.searchsorted: out= is not supported{called_at()}", NotImplementedError)
    check(
        isinstance(sorted_sequence, TensorProxy) and sorted_sequence.ndim >= 1,
        lambda: f"torch.searchsorted(): boundaries tensor should have positive dimension{called_at()}",
        RuntimeError,
    )
    if sorter is not None:
        sorted_sequence = sorted_sequence.gather(-1, sorter)
    if isinstance(input, TensorProxy) and sorted_sequence.ndim > 1:
        check(
            input.ndim == sorted_sequence.ndim and tuple(input.shape[:-1]) == tuple(sorted_sequence.shape[:-1]),
            lambda: (
                f"torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions of "
                f"boundaries tensor and input value tensor must match, but we got boundaries tensor "
                f"{list(sorted_sequence.shape)} and input value tensor {list(input.shape)}{called_at()}"
            ),
            RuntimeError,
        )
    return _insertion_points(sorted_sequence, input, _side(right, side), out_int32)


@register("torch.bucketize")
def bucketize(
    input: Any, boundaries: TensorProxy, *, out_int32: bool = False, right: bool = False, out: Any = None
) -> TensorProxy:
    """The bucket of each value among the 1-D `boundaries` (searchsorted with the roles swapped)."""
    check(out is None, lambda: f"torch.bucketize: out= is not supported{called_at()}", NotImplementedError)
    check(
        isinstance(boundaries, TensorProxy) and boundaries.ndim == 1,
        lambda: (
            f"torch.bucketize(): boundaries tensor must be 1 dimension, but got dim("
            f"{getattr(boundaries, 'ndim', boundaries)}){called_at()}"
        ),
        RuntimeError,
    )
    return _insertion_points(boundaries, input, right, out_int32)
