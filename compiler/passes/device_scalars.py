"""device_scalars: chosen number inputs become 0-d tensors on the computation's device.

Why: a CUDA graph replays the scalar arguments its kernels were captured with, so a number input
that changes on every call (a learning rate under a schedule, an optimizer's step count) keeps a
computation from replaying one. Read from a 0-d device tensor instead, the number is a value in
memory: the graph's runner writes each call's value into that tensor before a replay
(runtime/cuda_graphs.py), and one graph serves every value.

Assumes: a flattened, pure trace (after the pure passes), whose number inputs named in `names` are
`NumberProxy`s of Python type bool, int or float. Guarantees: those inputs are tensors of shape ()
and dtype bool, int64 or float64 on `device`, keeping their names (the computation's signature is
the same); every number computed from them (`1 - beta1 ** step`) is a 0-d tensor of its Python
type's dtype, computed in the widest of its operands' and result's kinds (bool < int < float), as
Python computes it (an int true division in float64, a floor of a float converted after); a
tensor op reading one reads it converted to the op's dtype and broadcast to its shape, as the
number would have been cast. Values are Python's up to float64 rounding.

A slice, or a slice update, whose start along one dim is such a number (a KV cache written at
the decoding position, `cache[:, :, pos : pos + 1] = k`; a rotary table read there, `cos[pos]`),
and which takes a fixed extent there and every other dim whole, becomes an `index_select` (an
`index_copy`) at `iota(extent) + start`: the position is read on the device as well.

Raises `NumberStaysNumber` where a number computed from them is read by anything else (a
shape, a factory's fill value, the trace's output): the caller keeps the numbers as they are.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import torch

from compiler.core import dtypes
from compiler.core.context import TraceContext
from compiler.core.ir import BoundSymbol, NumberProxy, TensorProxy, Trace, proxies_in
from compiler.core.proxies import map_proxies, same_extent
from compiler.passes import trace_pass
from compiler.prims import COMPARISONS, ELEMENTWISE, Prim

DTYPES = dtypes.NUMBER_DTYPES


class NumberStaysNumber(Exception):
    """A number input cannot become a device tensor: the message says what reads it as a number."""


@trace_pass("device_scalars")
def device_scalars(trace: Trace, names: Collection[str], device: torch.device) -> Trace:
    """The trace with the number inputs named in `names` read from 0-d tensors on `device` (see the
    module); raises `NumberStaysNumber` where one is read other than as an elementwise operand."""
    context = TraceContext(reserved=trace.names())
    tensors: dict[str, TensorProxy] = {}  # a number's name -> the 0-d tensor that holds it now
    inputs = []
    for proxy in trace.inputs:
        if proxy.name in names:
            if not isinstance(proxy, NumberProxy) or proxy.python_type not in DTYPES:
                raise NumberStaysNumber(f"{proxy.name!r} is not a bool, int or float input")
            proxy = tensors[proxy.name] = TensorProxy((), DTYPES[proxy.python_type], device, name=proxy.name)
        inputs.append(proxy)
    bsyms: list[BoundSymbol] = []
    numbers = {b.output.name: b for b in trace.bsyms if isinstance(b.output, NumberProxy)}
    renamed: dict[int, TensorProxy] = {}  # a slice's output -> its index_select's (see `_at_position`)
    swap = lambda p: renamed.get(id(p), p)
    for bsym in trace.bsyms:
        if renamed and any(id(p) in renamed for p in bsym.inputs):
            bsym = bsym.replace(args=map_proxies(bsym.args, swap))
        read = [p.name for p in bsym.inputs if p.name in tensors]
        if not read:
            bsyms.append(bsym)
        elif bsym.sym in (Prim.SLICE, Prim.SLICE_UPDATE):
            bsyms += _at_position(bsym, tensors, numbers, renamed, device, context)
        elif bsym.sym not in ELEMENTWISE:
            name = bsym.sym.value if isinstance(bsym.sym, Prim) else bsym.sym.name
            raise NumberStaysNumber(f"{read[0]!r} is read by {name}, which takes it as a number")
        elif isinstance(bsym.output, NumberProxy):
            bsyms += _number_op(bsym, tensors, device, context)
        else:
            bsyms.append(_tensor_op(bsym, tensors, device, context, bsyms))
    returned = [p.name for p in proxies_in(trace.output) if p.name in tensors]
    if returned:
        raise NumberStaysNumber(f"{returned[0]!r} is returned as a number")
    return trace.with_bsyms(bsyms, inputs=tuple(inputs), output=map_proxies(trace.output, swap))


def _kind(value: Any, tensors: dict[str, TensorProxy]) -> type:
    """The Python kind (bool, int or float) of an operand of a number op."""
    if isinstance(value, NumberProxy):
        kind = dtypes.python_type(tensors[value.name].dtype) if value.name in tensors else value.python_type
    else:
        kind = type(value)
    if kind not in DTYPES:
        raise NumberStaysNumber(f"a number op reads {value!r}, not a bool, int or float")
    return kind


def _converted(
    value: Any, dtype: torch.dtype, tensors: dict[str, TensorProxy], context: TraceContext, lines: list[BoundSymbol]
) -> Any:
    """`value` as an operand of dtype `dtype`: a tensorized number's tensor, converted where it is
    of another dtype (appending the conversion to `lines`); any other value as it is."""
    if not isinstance(value, NumberProxy) or value.name not in tensors:
        return value
    tensor = tensors[value.name]
    if tensor.dtype == dtype:
        return tensor
    out = TensorProxy((), dtype, tensor.device, name=context.fresh("t"))
    lines.append(BoundSymbol(Prim.CONVERT_ELEMENT_TYPE, (tensor, dtype), {}, out))
    return out


def _number_op(
    bsym: BoundSymbol, tensors: dict[str, TensorProxy], device: torch.device, context: TraceContext
) -> list[BoundSymbol]:
    """A number op reading a tensorized number, as 0-d tensor ops; its output is tensorized too."""
    result = bsym.output
    kind = result.python_type
    if kind not in DTYPES:
        raise NumberStaysNumber(f"{result.name!r} is a {kind.__name__}, not a bool, int or float")
    lines: list[BoundSymbol] = []
    if bsym.sym is Prim.CONVERT_ELEMENT_TYPE:
        value = _converted(bsym.args[0], DTYPES[kind], tensors, context, lines)
        tensors[result.name] = value
        return lines
    operands = list(bsym.args)
    if bsym.sym is Prim.WHERE:  # the condition is a bool; the branches are computed in their kind
        operands[0] = _converted(operands[0], torch.bool, tensors, context, lines)
        data = operands[1:]
    else:
        data = operands
    compute = max([_kind(v, tensors) for v in data] + [kind], key=dtypes.category)
    start = len(operands) - len(data)
    operands[start:] = [_converted(v, DTYPES[compute], tensors, context, lines) for v in data]
    computed_dtype = torch.bool if bsym.sym in COMPARISONS else DTYPES[compute]
    computed = TensorProxy((), computed_dtype, device, name=context.fresh("t"))
    lines.append(BoundSymbol(bsym.sym, tuple(operands), {}, computed))
    if computed_dtype != DTYPES[kind]:  # a floor, a sign of a float: computed in float64, then converted
        converted = TensorProxy((), DTYPES[kind], device, name=context.fresh("t"))
        lines.append(BoundSymbol(Prim.CONVERT_ELEMENT_TYPE, (computed, DTYPES[kind]), {}, converted))
        computed = converted
    tensors[result.name] = computed
    return lines


def _tensor_op(
    bsym: BoundSymbol,
    tensors: dict[str, TensorProxy],
    device: torch.device,
    context: TraceContext,
    lines: list[BoundSymbol],
) -> BoundSymbol:
    """A tensor op reading a tensorized number, reading it converted to the op's dtype and
    broadcast to its shape (appending those lines to `lines`)."""
    operands = list(bsym.args)
    data = [v for i, v in enumerate(operands) if isinstance(v, TensorProxy) and not (bsym.sym is Prim.WHERE and i == 0)]
    if not data or data[0].device != device:
        where = "no tensor operand" if not data else f"a tensor on {data[0].device}"
        raise NumberStaysNumber(f"{bsym.output.name!r} reads a number input with {where}")
    shape = data[0].shape

    def operand(i: int, value: Any) -> Any:
        if not isinstance(value, NumberProxy) or value.name not in tensors:
            return value
        dtype = torch.bool if bsym.sym is Prim.WHERE and i == 0 else data[0].dtype
        scalar = _converted(value, dtype, tensors, context, lines)
        if not shape:
            return scalar
        out = TensorProxy(shape, dtype, device, name=context.fresh("t"))
        lines.append(BoundSymbol(Prim.BROADCAST_IN_DIM, (scalar, list(shape), []), {}, out))
        return out

    return bsym.replace(args=tuple(operand(i, v) for i, v in enumerate(operands)))


def _at_position(
    bsym: BoundSymbol,
    tensors: dict[str, TensorProxy],
    numbers: dict[str, BoundSymbol],
    renamed: dict[int, TensorProxy],
    device: torch.device,
    context: TraceContext,
) -> list[BoundSymbol]:
    """A slice (a slice update) starting at a tensorized number along one dim, with a fixed extent
    there and every other dim whole, as an index_select (an index_copy) at `iota(extent) + start`;
    raises `NumberStaysNumber` otherwise. `numbers`: the number ops of the trace by output name; a
    slice's output whose shape holds its extent as a number is replaced by one of the fixed extent,
    under its name, recorded in `renamed` for the lines after it."""
    buf, (starts, ends, steps) = bsym.args[0], bsym.args[-3:]
    moved = [d for d in range(buf.ndim) if any(_tensorized(v, tensors) for v in (starts[d], ends[d]))]
    region = bsym.output if bsym.sym is Prim.SLICE else bsym.args[1]
    d = moved[0]
    extent = _fixed_extent(region.shape[d], starts[d], ends[d], numbers)
    whole = all(
        same_extent(starts[k], 0) and same_extent(ends[k], buf.shape[k]) and steps[k] == 1
        for k in range(buf.ndim)
        if k != d
    )
    if not (len(moved) == 1 and whole and steps[d] == 1 and type(extent) is int and extent >= 1):
        name = next(v.name for v in (*starts, *ends) if _tensorized(v, tensors))
        raise NumberStaysNumber(
            f"{name!r} bounds a slice of {buf.name} that is not one fixed extent along one dim, the others whole"
        )
    if buf.device != device:
        raise NumberStaysNumber(f"{bsym.output.name!r} slices {buf.name} on {buf.device} at a number input")
    lines: list[BoundSymbol] = []
    start = _converted(starts[d], torch.int64, tensors, context, lines)  # NOTE: a fixed extent moves both ends
    fresh = lambda: TensorProxy((extent,), torch.int64, device, name=context.fresh("t"))
    offsets, spread, index = fresh(), fresh(), fresh()
    lines.append(BoundSymbol(Prim.IOTA, (extent, 0, 1, torch.int64, device), {}, offsets))
    lines.append(BoundSymbol(Prim.BROADCAST_IN_DIM, (start, [extent], []), {}, spread))
    lines.append(BoundSymbol(Prim.ADD, (offsets, spread), {}, index))
    if bsym.sym is Prim.SLICE:
        shape = [extent if k == d else n for k, n in enumerate(bsym.output.shape)]
        out = renamed[id(bsym.output)] = TensorProxy(shape, buf.dtype, buf.device, name=bsym.output.name)
        lines.append(BoundSymbol(Prim.INDEX_SELECT, (buf, d, index), {}, out))
    else:
        lines.append(BoundSymbol(Prim.INDEX_COPY, (buf, d, index, bsym.args[1]), {}, bsym.output))
    return lines


def _fixed_extent(extent: Any, start: Any, end: Any, numbers: dict[str, BoundSymbol]) -> Any:
    """`extent` where it is an int; else n where `end` is computed as `start + n` (`x[pos]` slices
    `pos : pos + 1`), n an int; else `extent` as it is."""
    made = numbers.get(end.name) if isinstance(end, NumberProxy) else None
    if type(extent) is int or made is None or made.sym is not Prim.ADD:
        return extent
    a, b = made.args
    step = b if a is start else a if b is start else None
    return step if type(step) is int else extent


def _tensorized(value: Any, tensors: dict[str, TensorProxy]) -> bool:
    return isinstance(value, NumberProxy) and value.name in tensors
