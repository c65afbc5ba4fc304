"""The translator: the state of one fusion definition being written as Python source.

Conventions of the generated code:
- Inputs come in region order: tensors as `define_tensor` with the descriptor of the actual
  argument (size-1 dims as broadcast `1`, others symbolic `-1`, contiguity and stride order as
  nvFuser's `compute_tensor_descriptor` computes them); symbolic numbers as
  `define_scalar(None, dtype=...)`, except those the definition does not read
  (`nvfuser_translate.FusionSource.taken` says which region inputs it takes).
- Tensor sizes are read from tensors (`fd.ops.size`), not written as the numbers the trace holds:
  a size that a broadcast keeps is its operand's; a broadcast's new dims, a `full`'s shape and a
  materialised broadcast take the size of the first input tensor dim that has it (`extent`).
  A definition traced with constant sizes and one traced with symbolic sizes are then the same
  text, so automatic dynamic's second entry reuses the first entry's compiled definitions (a
  layer norm with weights over a length that became symbolic). Reshapes, slices and `iota` keep
  the trace's numbers: read from a tensor, a reshape's sizes would make nvFuser treat a static
  reshape as a dynamic one. So do the static broadcasts of a region with a cat (a rotary
  embedding), and its inputs of static sizes are declared with those sizes: with every extent
  known, nvFuser's kernel for it need not divide by extents read at run time, and is faster.
- bf16/fp16 values are computed in fp32: an op on them upcasts its operands, and its result is
  held in fp32 and only cast down where a bf16/fp16 value is needed (a region output, a
  write-back, an op that is not arithmetic). Round trips `f32 -> bf16 -> f32` inside a region
  are dropped, as torch.compile and thunder do, except where rounding decides the result: the
  prims of `prims.EXACT_OPERANDS` (comparisons, floor, ...), maxima and minima (which the
  backward finds again by `x == max(x)`) and conversions to integers read a
  value held in fp32 rounded to its own dtype (`exact_operand`; conversions to float64 or the
  other 16-bit dtype too: `x.half().double()` keeps fp16's rounding), and a value the region returns is
  read rounded by the ops on its way to such a prim or a max (`prims.ROUNDING_DECIDES`), as a
  backward that recomputes from the returned value reads it: a max's backward (`x == max(x)`)
  then finds the maximum its forward found. Other ops read it in fp32 (a bias gradient sums the
  unrounded gradient it also returns).
- Python numbers become `define_scalar(value, dtype=...)` typed like the tensor they meet;
  symbolic scalars are cast to that dtype once.
- A write-back `copy_to(computed, buffer)` becomes `fd.add_output(fd.ops.set(computed),
  alias_input=buffer)`: the fusion writes into the buffer, and no copy kernel is needed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import torch

from compiler.core import dtypes
from compiler.core.errors import check
from compiler.core.executor import Region
from compiler.core.ir import NumberProxy, Proxy, TensorProxy
from compiler.executors.nvfuser.define.aliasing import copied_write_backs
from compiler.executors.nvfuser.define.broadcast import Flags
from compiler.executors.nvfuser.define.dependencies import has_cat
from compiler.executors.nvfuser.define.descriptors import ScalarDesc, TensorDesc, broadcast_dims
from compiler.executors.nvfuser.define.layouts import output_orders, stride_order
from compiler.prims import ROUNDING_DECIDES, converts_to_integer, rounded_on_purpose

NV_DTYPES: dict[torch.dtype, str] = {
    torch.float64: "DataType.Double",
    torch.float32: "DataType.Float",
    torch.float16: "DataType.Half",
    torch.bfloat16: "DataType.BFloat16",
    torch.int64: "DataType.Int",
    torch.int32: "DataType.Int32",
    torch.bool: "DataType.Bool",
}
SCALAR_DTYPES = dtypes.NUMBER_DTYPES
LOW_PRECISION = frozenset({torch.float16, torch.bfloat16})


class TranslationError(RuntimeError):
    """A region cannot be written as a fusion definition."""


# ---------------------------------------------------------------------------------------------
# The translator


def literal(value: Any, dtype: torch.dtype) -> str:
    """`value` as Python source of a constant of `dtype` (bool, int, or float with inf/nan spelled out)."""
    if dtype is torch.bool:
        return repr(bool(value))
    if dtype.is_floating_point:
        value = float(value)
        return repr(value) if math.isfinite(value) else f'float("{value}")'
    return repr(int(value))


def _read_rounded(region: Region) -> set[str]:
    """The bf16/fp16 values `region` returns from which its data flows to a prim where rounding
    decides the result (`prims.ROUNDING_DECIDES`, a conversion to an integer). Elsewhere the region
    reads them in fp32, as torch.compile and thunder do: a bias gradient sums the unrounded values."""
    feeds: set[str] = set()
    for bsym in reversed(region.bsyms):
        if bsym.sym in ROUNDING_DECIDES or converts_to_integer(bsym) or any(p.name in feeds for p in bsym.outputs):
            feeds.update(p.name for p in bsym.inputs)
    return {p.name for p in region.outputs if isinstance(p, TensorProxy) and p.dtype in LOW_PRECISION} & feeds


class DefinitionWriter:
    """Writes the body of one fusion definition, one prim at a time."""

    def __init__(self, region: Region, descriptors: Sequence[TensorDesc | ScalarDesc]) -> None:
        self.region = region
        self.lines: list[str] = []
        self.var: dict[str, str] = {}  # trace name -> variable holding it in its own dtype
        self.f32: dict[str, str] = {}  # bf16/fp16 trace name -> variable holding it in fp32
        self.exact: set[str] = set()  # names whose fp32 variable holds exactly their bf16/fp16 value
        self.rounded: dict[str, str] = {}  # name -> its bf16/fp16 value cast up, where `f32` holds more
        self.upcast_of: dict[str, TensorProxy] = {}  # fp32 name -> the bf16/fp16 value it converts (held in fp32)
        # bf16/fp16 values the region returns that lead to a prim where rounding decides: the ops
        # after them in the region read them as returned (rounded), as a backward that recomputes
        # from them will
        self.read_rounded = _read_rounded(region)
        self.rounded_on_purpose = rounded_on_purpose(region.inputs, region.bsyms)  # `x.half()` of fp32 data
        self.casts: dict[tuple[str, torch.dtype], str] = {}
        self.used: set[str] = {"fd", "DataType"}
        self.inputs: set[str] = set()
        self.shape_scalars: set[str] = set()
        self.flags: dict[str, Flags] = {}  # trace name -> which dims nvFuser may hold as broadcast
        self.segmented: set[str] = set()  # trace names computed behind a segment_set
        self.merged_broadcasts: set[str] = set()  # reshapes that merged a materialised broadcast (`_reshape`)
        self.squeeze_first: set[str] = set()  # slices squeezed in front of their segment_set (`_slice`)
        self.rebroadcast: set[str] = set()  # slices squeezed, segmented and broadcast back (`_slice`)
        self.segment_sets: dict[str, str] = {}  # trace name -> a segment_set of it (see `segment`)
        self.scalar_inputs: dict[str, int] = {}  # variable of a scalar input -> its region input index
        self.extents: dict[tuple[str, Any], str] = {}  # a size (`_extent_key`) -> an input dim of that size
        for index, (proxy, desc) in enumerate(zip(region.inputs, descriptors)):
            self.define_input(proxy, desc)
            if not isinstance(desc, TensorDesc):
                self.scalar_inputs[self.var[proxy.name]] = index
                continue
            for d, size in enumerate(proxy.shape):
                key = _extent_key(size)
                if key is not None and key not in self.extents:
                    self.extents[key] = f"fd.ops.size({self.var[proxy.name]}, dim={d})"
        self.copied = copied_write_backs(region, descriptors)  # write-backs returned, not aliased
        self.orders = output_orders(region, descriptors)  # outputs laid out as eager would, not row-major
        self.copied_values: list[str] = []

    def fresh(self, base: str) -> str:
        name, k = base, 0
        while name in self.used:
            k += 1
            name = f"{base}_{k}"
        self.used.add(name)
        return name

    def segment(self, p: TensorProxy, x: str) -> str:
        """`x` (the variable holding `p`) behind one segment_set, shared by every reader that asks."""
        if p.name not in self.segment_sets:
            self.segment_sets[p.name] = self.emit(f"{p.name}_seg", f"fd.ops.segment_set({x})")
        return self.segment_sets[p.name]

    def emit(self, base: str, expr: str) -> str:
        name = self.fresh(base)
        self.lines.append(f"{name} = {expr}")
        return name

    def define_input(self, proxy: Proxy, desc: TensorDesc | ScalarDesc) -> None:
        if isinstance(desc, TensorDesc):
            shape = list(desc.shape)
            # NOTE: a region with a cat writes its static broadcasts as numbers (`_broadcast_in_dim`);
            # beside them, inputs of symbolic extents made nvfuser_direct 0.2.36 refuse GPT-J's
            # rotary fusion ("Invalid domains to map": a number and an input's extent mapped as one
            # dim). Its inputs of static sizes are declared with those sizes too.
            if has_cat(self.region) and all(type(size) is int for size in proxy.shape):
                shape = list(proxy.shape)
            expr = (
                f"fd.define_tensor(shape={shape}, contiguity={list(desc.contiguity)}, "
                f"dtype={NV_DTYPES[desc.dtype]}, stride_order={list(desc.stride_order)})"
            )
            self.flags[proxy.name] = broadcast_dims(desc)
        else:
            expr = f"fd.define_scalar(None, dtype={NV_DTYPES[SCALAR_DTYPES[desc.python_type]]})"
        self.var[proxy.name] = self.emit(proxy.name, expr)
        self.inputs.add(self.var[proxy.name])

    # -- values ---------------------------------------------------------------------------
    def tensor(self, p: TensorProxy) -> str:
        """The variable holding `p` in its own dtype (cast down from fp32 on first need)."""
        if p.name not in self.var:
            check(
                p.name in self.f32,
                lambda: f"{self.region.name}: {p.name} is used before it is defined",
                TranslationError,
            )
            self.var[p.name] = self.emit(p.name, f"fd.ops.cast({self.f32[p.name]}, dtype={NV_DTYPES[p.dtype]})")
        return self.var[p.name]

    def held_f32(self, p: TensorProxy) -> bool:
        """True when `p` (bf16/fp16) exists only in fp32 so far."""
        return p.name in self.f32 and p.name not in self.var

    def compute(self, p: TensorProxy, dtype: torch.dtype) -> str:
        """`p` as an operand of arithmetic done in `dtype` (fp32 for bf16/fp16 values)."""
        if p.dtype in LOW_PRECISION and dtype is torch.float32:
            if p.name not in self.f32:
                self.f32[p.name] = self.emit(f"{p.name}_f32", f"fd.ops.cast({self.tensor(p)}, dtype=DataType.Float)")
                self.exact.add(p.name)
            return self.f32[p.name]
        return self.tensor(p)

    def exact_operand(self, x: Any, dtype: torch.dtype) -> str:
        """`operand`, except that a bf16/fp16 tensor held in fp32 with more precision than its dtype
        has is read as its own dtype's value (rounded, then cast up): what the prims of
        `prims.EXACT_OPERANDS` and integer conversions need, as eager rounds every op's result."""
        if isinstance(x, TensorProxy) and x.name in self.upcast_of:  # `h.float()` of a held `h`: h's value
            x = self.upcast_of[x.name]
        if not isinstance(x, TensorProxy) or x.name not in self.f32 or x.name in self.exact:
            return self.operand(x, dtype)
        if dtype is not torch.float32:
            return self.tensor(x)
        if x.name not in self.rounded:
            narrow = self.tensor(x)
            self.rounded[x.name] = self.emit(f"{x.name}_rounded", f"fd.ops.cast({narrow}, dtype=DataType.Float)")
        return self.rounded[x.name]

    def operand(self, x: Any, dtype: torch.dtype) -> str:
        """A tensor, symbolic scalar or Python number as an operand of arithmetic in `dtype`."""
        if isinstance(x, TensorProxy):
            return self.compute(x, dtype)
        natural = SCALAR_DTYPES[x.python_type if isinstance(x, NumberProxy) else type(x)]
        target = dtype if dtypes.category(natural) <= dtypes.category(dtype) else natural
        if not isinstance(x, NumberProxy):
            return f"fd.define_scalar({literal(x, target)}, dtype={NV_DTYPES[target]})"
        if target is natural:
            return self.var[x.name]
        key = (x.name, target)
        if key not in self.casts:
            self.casts[key] = self.emit(
                f"{x.name}_{dtypes.short_name(target)}", f"fd.ops.cast({self.var[x.name]}, dtype={NV_DTYPES[target]})"
            )
        return self.casts[key]

    def size(self, value: Any) -> str:
        """A size or index; a symbolic one is a scalar input (recorded as a shape scalar)."""
        if isinstance(value, NumberProxy):
            self.shape_scalars.add(value.name)
            return self.var[value.name]
        return repr(int(value))

    def sizes(self, values: Sequence[Any]) -> str:
        """A list of sizes / indices (see `size`)."""
        return f"[{', '.join(self.size(v) for v in values)}]"

    def extent(self, value: Any) -> str:
        """A tensor's size: the size of the first input tensor dim that has it, where one has it
        (the same text for a constant size and for the symbolic size it becomes), else as `size`."""
        key = _extent_key(value)
        return self.extents[key] if key in self.extents else self.size(value)

    def extents_of(self, values: Sequence[Any]) -> str:
        """A shape (see `extent`)."""
        return f"[{', '.join(self.extent(v) for v in values)}]"

    def define(self, p: TensorProxy, expr: str, held: torch.dtype) -> None:
        """Binds `p` to `expr`, a value of dtype `held` (fp32 for a bf16/fp16 `p` computed in fp32)."""
        if held == p.dtype:
            self.var[p.name] = self.emit(p.name, expr)
        else:
            self.alias(p, self.emit(f"{p.name}_f32", expr), in_f32=True)

    def alias(self, p: TensorProxy, var: str, in_f32: bool) -> None:
        """Binds `p` to an existing variable (no line emitted, except the cast down of a returned
        bf16/fp16 value computed in fp32: the ops after it read it rounded, as the region returns it)."""
        if in_f32 and p.name in self.read_rounded:
            self.var[p.name] = self.emit(p.name, f"fd.ops.cast({var}, dtype={NV_DTYPES[p.dtype]})")
        else:
            (self.f32 if in_f32 else self.var)[p.name] = var

    def movable(self, p: TensorProxy) -> tuple[str, torch.dtype]:
        """`p` for a data-movement op: the fp32 copy when only that exists, else `p` itself."""
        if self.held_f32(p):
            return self.f32[p.name], torch.float32
        return self.tensor(p), p.dtype

    def finish(self, name: str) -> str:
        """The whole `def name(fd): ...` source, outputs added, scalar inputs it does not read left out."""
        returned: set[str] = set()
        outputs = [(self.tensor(p), self.orders.get(p.name)) for p in self.region.outputs]
        for var, order in outputs + [(var, None) for var in self.copied_values]:
            if order is not None and var not in self.inputs:
                var = self.emit(f"{var}_out", f"fd.ops.stride_order({var}, {stride_order(order)})")
            elif var in self.inputs or var in returned:
                var = self.emit(f"{var}_out", f"fd.ops.set({var})")
            self.lines.append(f"fd.add_output({var})")
            returned.add(var)
        unread = {var for var in self.scalar_inputs if not self._read(var)}
        self.lines = [line for line in self.lines if line.split(" = ", 1)[0] not in unread]
        dropped = {self.scalar_inputs[var] for var in unread}
        self.taken = [i for i in range(len(self.region.inputs)) if i not in dropped]
        body = "\n".join(f"    {line}" for line in self.lines) or "    pass"
        return f"def {name}(fd):\n{body}\n"

    def _read(self, var: str) -> bool:
        """Whether a line other than `var`'s definition reads `var`."""
        pattern = re.compile(rf"\b{re.escape(var)}\b")
        return any(pattern.search(line) for line in self.lines if not line.startswith(f"{var} = "))


def _extent_key(size: Any) -> tuple[str, Any] | None:
    """What identifies a size across a region's tensors: a symbolic size's name, a constant's value
    (None for 0 and 1, which stay constants: automatic dynamic never makes them symbolic)."""
    if isinstance(size, NumberProxy):
        return ("symbolic", size.name)
    return ("constant", int(size)) if int(size) >= 2 else None
