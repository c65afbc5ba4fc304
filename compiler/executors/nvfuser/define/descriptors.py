"""Input descriptors: how each fusion input is declared to nvFuser, and the key of the definition cache.

A tensor is declared by its shape spec (-1 symbolic, 1 broadcast), contiguity and stride order,
computed the way `nvfuser_direct.compute_tensor_descriptor` does; a symbolic scalar by its type.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from compiler.core.ir import NumberProxy, Proxy, TensorProxy


@dataclass(frozen=True)
class TensorDesc:
    """How a tensor input is declared: shape spec (-1 symbolic, 1 broadcast), contiguity, stride order."""

    shape: tuple[int, ...]
    contiguity: tuple[bool | None, ...]
    stride_order: tuple[int, ...]
    dtype: torch.dtype


@dataclass(frozen=True)
class ScalarDesc:
    """A symbolic scalar input of this Python type."""

    python_type: type


def shape_spec(proxy: TensorProxy, iteration: bool = False) -> tuple[int, ...]:
    """-1 for each dim, except 1 where the trace guarantees size 1 (nvFuser broadcasts those);
    all -1 when `iteration` (see nvfuser_broadcast.iteration_inputs)."""
    return tuple(1 if isinstance(s, int) and s == 1 and not iteration else -1 for s in proxy.shape)


def tensor_descriptor(
    spec: Sequence[int], sizes: Sequence[int], strides: Sequence[int]
) -> tuple[tuple[bool | None, ...], tuple[int, ...]]:
    """(contiguity, stride_order) the way nvFuser's `compute_tensor_descriptor` defines them.

    Dims with stride 0 keep their position; the others are ordered by decreasing stride (stably).
    stride_order[i] is dim i's rank counted from the innermost; contiguity is listed in that
    allocation order (outermost first): None for broadcast dims (size 1 in `spec` or stride 0),
    otherwise whether the stride equals the next inner non-broadcast dim's stride times its size
    (1 for the innermost).
    """
    rank = len(sizes)
    moving = sorted((i for i in range(rank) if strides[i] != 0), key=lambda i: -strides[i])
    order = list(moving)
    for i in range(rank):
        if strides[i] == 0:
            order.insert(i, i)
    broadcast = [strides[i] == 0 or spec[i] == 1 for i in range(rank)]
    contiguity: list[bool | None] = [None] * rank
    for position, dim in enumerate(order):
        if broadcast[dim]:
            continue
        inner = next((d for d in order[position + 1 :] if not broadcast[d]), None)
        expected = 1 if inner is None else strides[inner] * sizes[inner]
        contiguity[position] = strides[dim] == expected
    stride_order = [0] * rank
    for position, dim in enumerate(order):
        stride_order[dim] = rank - 1 - position
    return tuple(contiguity), tuple(stride_order)


def broadcast_dims(desc: TensorDesc) -> tuple[bool, ...]:
    """Per dim of a tensor input declared by `desc`: True where nvFuser holds it as a broadcast dim
    (size 1 in the shape spec, or a stride-0 dim of an expanded tensor: contiguity None)."""
    rank = len(desc.shape)
    return tuple(s == 1 or desc.contiguity[rank - 1 - desc.stride_order[d]] is None for d, s in enumerate(desc.shape))


def describe(proxy: Proxy, value: Any, iteration: bool = False) -> TensorDesc | ScalarDesc:
    """The descriptor of an actual argument (a tensor, or a number) for the region input `proxy`."""
    if isinstance(proxy, TensorProxy):
        return layout_descriptor(proxy, tuple(value.shape), tuple(value.stride()), iteration)
    return ScalarDesc(proxy.python_type)


def layout_descriptor(
    proxy: TensorProxy, sizes: Sequence[int], strides: Sequence[int], iteration: bool = False
) -> TensorDesc:
    """The descriptor of a tensor input `proxy` whose argument has these sizes and strides
    (size-1 dims declared as iteration dims when `iteration`)."""
    spec = shape_spec(proxy, iteration)
    contiguity, order = tensor_descriptor(spec, sizes, strides)
    return TensorDesc(spec, contiguity, order, proxy.dtype)


def default_descriptor(proxy: Proxy, iteration: bool = False) -> TensorDesc | ScalarDesc:
    """The descriptor of a contiguous tensor with the proxy's trace shape (golden tests)."""
    if not isinstance(proxy, TensorProxy):
        return ScalarDesc(proxy.python_type)
    sizes = [s.value if isinstance(s, NumberProxy) else s for s in proxy.shape]
    strides, running = [], 1
    for size in reversed(sizes):
        strides.insert(0, running)
        running *= max(size, 1)
    return layout_descriptor(proxy, sizes, strides, iteration)


# NOTE: a string literal (left alone), or a whole identifier with the `=` that may follow it.
_TOKEN = re.compile(r"""('(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")|(?<!\w)([A-Za-z_]\w*)(\s*=(?!=))?""")
_TARGET = re.compile(r"^[ \t]*([A-Za-z_]\w*)[ \t]*=(?!=)", re.MULTILINE)
_DEF = re.compile(r"^def[ \t]+([A-Za-z_]\w*)", re.MULTILINE)


def structure_key(source: str) -> str:
    """`source` (a generated `def f(fd): ...`) with its function and variables renamed in order of
    definition: two regions with the same key define the same fusion, whatever their proxies are
    called, so one FusionDefinition (and one nvFuser compilation) serves both.

    Renamed: the function's name and each assignment target, wherever it is read; left alone:
    attributes (`fd.ops.add`), keyword names (`dims=`), string literals and everything else.
    """
    names = {m.group(1): "fusion" for m in _DEF.finditer(source)}
    for m in _TARGET.finditer(source):
        names.setdefault(m.group(1), f"v{len(names)}")

    def rename(m: re.Match) -> str:
        new = names.get(m.group(2)) if m.group(2) else None
        if new is None:
            return m.group(0)
        k = m.start() - 1
        while k >= 0 and source[k] in " \t":
            k -= 1
        before = source[k] if k >= 0 else ""
        if before == "." or (m.group(3) and before in ("(", ",")):
            return m.group(0)  # an attribute, or a keyword argument's name
        return new + (m.group(3) or "")

    return _TOKEN.sub(rename, source)
