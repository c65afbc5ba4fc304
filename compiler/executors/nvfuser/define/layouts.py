"""The memory order eager PyTorch would give a region's outputs, for `fd.ops.stride_order`.

nvFuser allocates an output in its own order, row-major unless its allocation-order inference
says otherwise, and that inference does not see through a reshape followed by a permute. Eager
PyTorch keeps a permuted view's memory order through elementwise ops: rotary embedding applied
to `linear(x).view(b, s, h, d).transpose(1, 2)` gives a [b, h, s, d] tensor laid out as
[b, s, h, d]. Attention reads it in place, its output follows the query's order, and the
`transpose(1, 2).reshape(b, s, h * d)` after it is a view. Laid out row-major instead, that
reshape copies the whole attention output, a kernel per attention block that eager never runs.

The analysis follows the region's prims: a region input has the order of its actual strides
(its descriptor), a permute reorders its operand's order, a slice keeps it, an elementwise op
takes the order of its first operand that is not a broadcast (as TensorIterator does), and
anything else (a reshape, a reduction, a cat, a factory) is row-major. An output whose order is
not row-major is marked with that order, except in a region that reduces, where an order whose
innermost dim is not the last is left to nvFuser: nvfuser_direct 0.2.36's reduction schedulers
vectorize along the last dim and refused such an output ("Vectorized dim for producer has to be
from an inner most position", fusion_kernel_runtime.cpp:476; Whisper's encoder, whose residual
stream eager keeps laid out as its convolution's transposed output, with each layer norm).
"""

from __future__ import annotations

from collections.abc import Sequence

from compiler.core.executor import Region
from compiler.core.ir import TensorProxy
from compiler.core.proxies import same_extent
from compiler.executors.nvfuser.define.descriptors import ScalarDesc, TensorDesc
from compiler.prims import ELEMENTWISE, REDUCTIONS, Prim

Order = tuple[int, ...]  # dims from outermost to innermost in memory
_BROADCAST = ()  # a broadcast_in_dim's result: its order never decides an elementwise op's


def physical_order(stride_order: Sequence[int]) -> Order:
    """Dims from outermost to innermost for an nvFuser `stride_order` (larger = outer)."""
    return tuple(sorted(range(len(stride_order)), key=lambda d: -stride_order[d]))


def stride_order(order: Order) -> list[int]:
    """nvFuser's `stride_order` of a memory order (the inverse of `physical_order`)."""
    ranks = [0] * len(order)
    for position, d in enumerate(order):
        ranks[d] = len(order) - 1 - position
    return ranks


def output_orders(region: Region, descriptors: Sequence[TensorDesc | ScalarDesc]) -> dict[str, Order]:
    """Region output name -> its eager memory order, for the outputs that are not row-major."""
    orders: dict[str, Order | None] = {}
    for proxy, desc in zip(region.inputs, descriptors):
        if isinstance(desc, TensorDesc):
            expanded = any(c is None and s != 1 for c, s in zip(desc.contiguity, desc.shape))
            orders[proxy.name] = _BROADCAST if expanded else physical_order(desc.stride_order)
    for bsym in region.bsyms:
        out = bsym.output
        if not isinstance(out, TensorProxy):
            continue
        orders[out.name] = _order_of(bsym.sym, bsym.args, out, orders)
    reduces = any(bsym.sym in REDUCTIONS for bsym in region.bsyms)
    result: dict[str, Order] = {}
    for p in region.outputs:
        order = orders.get(p.name)
        if order and not _row_major(order, p.shape) and not (reduces and not _last_dim_innermost(order, p.shape)):
            result[p.name] = order
    return result


def _holding_data(order: Order, shape: Sequence[object]) -> list[int]:
    """The dims of `order`, in its order, but for those of size 1 (which hold no data)."""
    return [d for d in order if not (isinstance(shape[d], int) and shape[d] == 1)]


def _last_dim_innermost(order: Order, shape: Sequence[object]) -> bool:
    """Whether `order` keeps the last dim of size other than 1 innermost (the dim a norm reduces)."""
    dims = _holding_data(order, shape)
    return not dims or dims[-1] == max(dims)


def _row_major(order: Order, shape: Sequence[object]) -> bool:
    """Whether `order` is row-major but for where it puts dims of size 1 (which hold no data)."""
    dims = _holding_data(order, shape)
    return dims == sorted(dims)


def _order_of(sym: object, args: Sequence[object], out: TensorProxy, orders: dict[str, Order | None]) -> Order | None:
    if sym is Prim.BROADCAST_IN_DIM:
        return _BROADCAST
    if sym is Prim.PERMUTE:
        operand = orders.get(args[0].name)
        if not operand:
            operand = tuple(range(out.ndim))
        position = {d: i for i, d in enumerate(args[1])}  # operand dim -> output dim
        return tuple(position[d] for d in operand)
    if sym is Prim.SLICE:
        return orders.get(args[0].name)
    if sym in ELEMENTWISE:
        for a in args:
            if isinstance(a, TensorProxy) and a.ndim == out.ndim and all(map(same_extent, a.shape, out.shape)):
                order = orders.get(a.name)
                if order != _BROADCAST:
                    return order
    return None
