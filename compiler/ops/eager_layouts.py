"""eager's memory layout for the outputs of composite ops, where their decomposition would say otherwise.

`aliasing.layout` models eager's strides prim by prim: an elementwise prim lays its output out as
TensorIterator does (in its operands' memory order). An op the compiler decomposes into such prims
may be one ATen kernel in eager that allocates its output row-major whatever its input's order:
`F.layer_norm`, `softmax` or `masked_fill` of a transposed tensor are contiguous in eager, while the
prims they are made of would follow the transposed order. What reads the layout (dropout's draw
order, `Tensor.is_contiguous`, whether a reshape copies) needs eager's answer, so after such an op
its outputs' layouts are set here: row-major, or for the norms with a channels-last variant, the
format eager suggests for the input (channels-last when the input is laid out so).
"""

from __future__ import annotations

from typing import Any

import torch

from compiler.core import ir
from compiler.core.ir import TensorProxy
from compiler.ops import aliasing

# ops whose eager output is row-major whatever the input's layout
ROW_MAJOR = frozenset(
    {
        "torch.nn.functional.layer_norm",
        "torch.layer_norm",
        "torch.softmax",
        "torch.Tensor.softmax",
        "torch.nn.functional.softmax",
        "torch.log_softmax",
        "torch.Tensor.log_softmax",
        "torch.nn.functional.log_softmax",
        "torch.special.softmax",
        "torch.special.log_softmax",
        "torch.nn.functional.logsigmoid",
        "torch.masked_fill",
        "torch.Tensor.masked_fill",
        "torch.tril",
        "torch.Tensor.tril",
        "torch.triu",
        "torch.Tensor.triu",
        "torch.cumsum",
        "torch.Tensor.cumsum",
        "torch.cumprod",
        "torch.Tensor.cumprod",
        "torch.logcumsumexp",
        "torch.Tensor.logcumsumexp",
    }
)
# ops whose eager output takes the memory format eager suggests for the input (channels-last or row-major)
SUGGESTED_FORMAT = frozenset(
    {
        "torch.nn.functional.batch_norm",
        "torch.nn.functional.group_norm",
        "torch.group_norm",
        "torch.nn.functional.rms_norm",
        "torch.rms_norm",
    }
)


def after_op(name: str, args: tuple, new_outputs: list) -> None:
    """Sets eager's layout for the tensors `new_outputs` of the op registered as `name`."""
    if name in ROW_MAJOR:
        memory_format: Any = torch.contiguous_format
    elif name in SUGGESTED_FORMAT:
        memory_format = _suggested_format(args[0]) if args and isinstance(args[0], TensorProxy) else None
    else:
        return
    if memory_format is None:  # the input's layout is not known: nor is the output's
        return
    for p in new_outputs:
        if isinstance(p, TensorProxy):
            aliasing.set_memory_format(p, p, memory_format)


def eager_strides(t: TensorProxy) -> tuple[int, ...] | None:
    """eager's strides of `t` as far as `aliasing`'s model knows them, for a choice that does not
    change the program's values (no guard on the inputs' strides, unlike `aliasing.read_strides`;
    None: unknown, or outside tracing)."""
    context = ir.current()
    concrete = all(type(s) is int for s in t.shape)
    return aliasing.layout(context, t) if context is not None and concrete else None


def memory_order(strides: tuple[int, ...]) -> list[int]:
    """The dims of a tensor with these strides from slowest to fastest in memory (ties: outer dim first)."""
    return sorted(range(len(strides)), key=lambda d: (-strides[d], d))


def _suggested_format(t: TensorProxy) -> Any:
    """channels_last (channels_last_3d) for a 4-D (5-D) `t` laid out channels-last, else row-major;
    None where `t`'s layout is not known."""
    strides = eager_strides(t)
    if strides is None:
        return None
    formats = {4: torch.channels_last, 5: torch.channels_last_3d}
    if t.ndim not in formats or t.shape[1] == 1:
        return torch.contiguous_format
    return formats[t.ndim] if memory_order(strides) == [0, *range(2, t.ndim), 1] else torch.contiguous_format
