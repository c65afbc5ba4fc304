"""Questions a program asks about a tensor's memory layout: `Tensor.is_contiguous` and
`Tensor.stride`, answered from eager's strides as `aliasing.layout` models them.

The answer becomes a constant of the trace, so the strides of every input it was derived from
are guarded in the prologue (`aliasing.read_strides`): a call with other strides traces again.
Where the model does not know the layout (symbolic sizes, an attention output) the question
raises, naming the tensor and the line; a row-major tensor of symbolic sizes is known to be
contiguous, though its strides are not numbers.
"""

from __future__ import annotations

from typing import Any

import torch

from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy
from compiler.ops import aliasing
from compiler.ops.eager_strides import ROW_MAJOR
from compiler.ops.operands import canonical_dim
from compiler.ops.registry import register


def _strides(input: TensorProxy, what: str, row_major: bool = False) -> Any:
    """eager's strides of `input`, or with `row_major` also `ROW_MAJOR`; raises where unknown."""
    strides = aliasing.read_strides(input)
    check(
        strides is not None and (row_major or strides is not ROW_MAJOR),
        lambda: (
            f"{what}: the memory layout of {input.name} (shape {tuple(input.shape)}) is not known while tracing "
            f"(symbolic sizes or an op whose output layout depends on the kernel){called_at()}"
        ),
        NotImplementedError,
    )
    return strides


def _dense_in_order(shape: list[int], strides: tuple[int, ...], order: list[int]) -> bool:
    """Whether `strides` are row-major over the dims in `order` (slowest first); dims of size 1
    can have any stride, and an empty tensor is contiguous, as in eager."""
    if 0 in shape:
        return True
    expected = 1
    for d in reversed(order):
        if shape[d] != 1:
            if strides[d] != expected:
                return False
            expected *= shape[d]
    return True


@register("torch.Tensor.is_contiguous")
def is_contiguous(input: TensorProxy, memory_format: Any = torch.contiguous_format) -> bool:
    """Whether eager's `input` is contiguous in `memory_format` (row-major, or channels-last for 4-D/5-D)."""
    strides = _strides(input, "Tensor.is_contiguous", row_major=memory_format is torch.contiguous_format)
    if strides is ROW_MAJOR:
        return True
    shape = [int(s) for s in input.shape]
    if memory_format is torch.contiguous_format:
        return _dense_in_order(shape, strides, list(range(input.ndim)))
    check(
        (memory_format, input.ndim) in ((torch.channels_last, 4), (torch.channels_last_3d, 5)),
        lambda: f"Tensor.is_contiguous: memory_format {memory_format} of a {input.ndim}-d tensor{called_at()}",
        RuntimeError,
    )
    return _dense_in_order(shape, strides, [0, *range(2, input.ndim), 1])


@register("torch.Tensor.stride")
def stride(input: TensorProxy, dim: int | None = None) -> Any:
    """eager's strides of `input` (one dim's with `dim`)."""
    strides = _strides(input, "Tensor.stride")
    return strides if dim is None else strides[canonical_dim(dim, input.ndim)]
