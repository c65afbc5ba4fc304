"""Translation of prims to `nvfuser_direct`: a region becomes the Python source of a fusion definition.

The source is a function `def nvfusion0(fd): ...` that calls `fd.define_tensor`,
`fd.define_scalar`, `fd.ops.*` and `fd.add_output`; it is exec'd against `nvfuser_direct` on the
GPU, compared as text in CPU golden tests, and pasted verbatim into repro scripts. Nothing here
imports nvFuser.

Conventions of the generated code:
- Inputs come in region order: tensors as `define_tensor` with the descriptor of the actual
  argument (size-1 dims as broadcast `1`, others symbolic `-1`, contiguity and stride order as
  nvFuser's `compute_tensor_descriptor` computes them); symbolic numbers as
  `define_scalar(None, dtype=...)`.
- bf16/fp16 values are computed in fp32: an op on them upcasts its operands, and its result is
  held in fp32 and only cast down where a bf16/fp16 value is needed (a region output, a
  write-back, an op that is not arithmetic). Round trips `f32 -> bf16 -> f32` inside a region
  are dropped, as torch.compile and thunder do.
- Python numbers become `define_scalar(value, dtype=...)` typed like the tensor they meet;
  symbolic scalars are cast to that dtype once.
- A write-back `copy_to(computed, buffer)` becomes `fd.add_output(fd.ops.set(computed),
  alias_input=buffer)`: the fusion writes into the buffer, and no copy kernel is needed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from compiler.core import dtypes
from compiler.core.errors import check
from compiler.core.ir import BoundSymbol, NumberProxy, Proxy, TensorProxy, callee_name
from compiler.executors.nvfuser_aliasing import copied_write_backs
from compiler.executors.nvfuser_broadcast import Flags, expanded_unit_dims, is_unit, iteration_inputs, output_flags
from compiler.executors.nvfuser_descriptors import (  # noqa: F401  (re-exported for callers)
    ScalarDesc,
    TensorDesc,
    default_descriptor,
    describe,
    layout_descriptor,
    shape_spec,
    tensor_descriptor,
)
from compiler.passes.fuse import Region
from compiler.prims import BINARY, UNARY, Prim

NV_DTYPES: dict[torch.dtype, str] = {
    torch.float64: "DataType.Double",
    torch.float32: "DataType.Float",
    torch.float16: "DataType.Half",
    torch.bfloat16: "DataType.BFloat16",
    torch.int64: "DataType.Int",
    torch.int32: "DataType.Int32",
    torch.bool: "DataType.Bool",
}
SCALAR_DTYPES: dict[type, torch.dtype] = {bool: torch.bool, int: torch.int64, float: torch.float64}
LOW_PRECISION = frozenset({torch.float16, torch.bfloat16})


class TranslationError(RuntimeError):
    """A region cannot be written as a fusion definition."""


# ---------------------------------------------------------------------------------------------
# The translator


def _literal(value: Any, dtype: torch.dtype) -> str:
    if dtype is torch.bool:
        return repr(bool(value))
    if dtype.is_floating_point:
        value = float(value)
        return repr(value) if math.isfinite(value) else f'float("{value}")'
    return repr(int(value))


class Translator:
    """Writes the body of one fusion definition, one prim at a time."""

    def __init__(self, region: Region, descriptors: Sequence[TensorDesc | ScalarDesc]) -> None:
        self.region = region
        self.lines: list[str] = []
        self.var: dict[str, str] = {}  # trace name -> variable holding it in its own dtype
        self.f32: dict[str, str] = {}  # bf16/fp16 trace name -> variable holding it in fp32
        self.casts: dict[tuple[str, torch.dtype], str] = {}
        self.used: set[str] = {"fd", "DataType"}
        self.inputs: set[str] = set()
        self.shape_scalars: set[str] = set()
        self.flags: dict[str, Flags] = {}  # trace name -> which dims nvFuser may hold as broadcast
        self.segmented: set[str] = set()  # trace names computed behind a segment_set
        for proxy, desc in zip(region.inputs, descriptors):
            self.define_input(proxy, desc)
        self.copied = copied_write_backs(region, descriptors)  # write-backs returned, not aliased
        self.copied_values: list[str] = []

    def fresh(self, base: str) -> str:
        name, k = base, 0
        while name in self.used:
            k += 1
            name = f"{base}_{k}"
        self.used.add(name)
        return name

    def emit(self, base: str, expr: str) -> str:
        name = self.fresh(base)
        self.lines.append(f"{name} = {expr}")
        return name

    def define_input(self, proxy: Proxy, desc: TensorDesc | ScalarDesc) -> None:
        if isinstance(desc, TensorDesc):
            expr = (
                f"fd.define_tensor(shape={list(desc.shape)}, contiguity={list(desc.contiguity)}, "
                f"dtype={NV_DTYPES[desc.dtype]}, stride_order={list(desc.stride_order)})"
            )
            self.flags[proxy.name] = tuple(s == 1 for s in desc.shape)
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
            return self.f32[p.name]
        return self.tensor(p)

    def operand(self, x: Any, dtype: torch.dtype) -> str:
        """A tensor, symbolic scalar or Python number as an operand of arithmetic in `dtype`."""
        if isinstance(x, TensorProxy):
            return self.compute(x, dtype)
        natural = SCALAR_DTYPES[x.python_type if isinstance(x, NumberProxy) else type(x)]
        target = dtype if dtypes.category(natural) <= dtypes.category(dtype) else natural
        if not isinstance(x, NumberProxy):
            return f"fd.define_scalar({_literal(x, target)}, dtype={NV_DTYPES[target]})"
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

    def define(self, p: TensorProxy, expr: str, held: torch.dtype) -> None:
        """Binds `p` to `expr`, a value of dtype `held` (fp32 for a bf16/fp16 `p` computed in fp32)."""
        if held == p.dtype:
            self.var[p.name] = self.emit(p.name, expr)
        else:
            self.f32[p.name] = self.emit(f"{p.name}_f32", expr)

    def alias(self, p: TensorProxy, var: str, in_f32: bool) -> None:
        """Binds `p` to an existing variable (no line emitted)."""
        (self.f32 if in_f32 else self.var)[p.name] = var

    def movable(self, p: TensorProxy) -> tuple[str, torch.dtype]:
        """`p` for a data-movement op: the fp32 copy when only that exists, else `p` itself."""
        if self.held_f32(p):
            return self.f32[p.name], torch.float32
        return self.tensor(p), p.dtype

    def finish(self, name: str) -> str:
        """The whole `def name(fd): ...` source, outputs added."""
        returned: set[str] = set()
        for var in [self.tensor(p) for p in self.region.outputs] + self.copied_values:
            if var in self.inputs or var in returned:
                var = self.emit(f"{var}_out", f"fd.ops.set({var})")
            self.lines.append(f"fd.add_output({var})")
            returned.add(var)
        body = "\n".join(f"    {line}" for line in self.lines) or "    pass"
        return f"def {name}(fd):\n{body}\n"


Translate = Callable[[Translator, BoundSymbol], None]

# ---------------------------------------------------------------------------------------------
# The table


def _elementwise(op: str, bool_op: str | None = None) -> Translate:
    def translate(tx: Translator, bsym: BoundSymbol) -> None:
        first = next(a for a in bsym.args if isinstance(a, TensorProxy))
        name = bool_op if bool_op is not None and first.dtype is torch.bool else op
        compute = dtypes.compute_dtype(first.dtype)
        args = ", ".join(tx.operand(a, compute) for a in bsym.args)
        out = bsym.output
        tx.define(out, f"fd.ops.{name}({args})", compute if out.dtype == first.dtype else out.dtype)

    return translate


def _pow(tx: Translator, bsym: BoundSymbol) -> None:
    base, exponent = bsym.args
    if isinstance(base, TensorProxy) and type(exponent) in (int, float) and exponent in (2, 3):
        # NOTE: torch's pow computes x**2 and x**3 by multiplication; so does a hand-written fusion.
        x = tx.compute(base, dtypes.compute_dtype(base.dtype))
        expr = f"fd.ops.mul({x}, {x})" if exponent == 2 else f"fd.ops.mul(fd.ops.mul({x}, {x}), {x})"
        tx.define(bsym.output, expr, dtypes.compute_dtype(base.dtype))
    else:
        _elementwise("pow")(tx, bsym)


def _where(tx: Translator, bsym: BoundSymbol) -> None:
    condition, a, b = bsym.args
    compute = dtypes.compute_dtype(bsym.output.dtype)
    args = f"{tx.operand(condition, torch.bool)}, {tx.operand(a, compute)}, {tx.operand(b, compute)}"
    tx.define(bsym.output, f"fd.ops.where({args})", compute)


def _convert(tx: Translator, bsym: BoundSymbol) -> None:
    a, dtype = bsym.args
    out = bsym.output
    if dtype is torch.float32 and a.dtype in LOW_PRECISION and a.name in tx.f32:
        tx.alias(out, tx.f32[a.name], in_f32=False)
    elif dtype in LOW_PRECISION and a.dtype is torch.float32:
        tx.alias(out, tx.tensor(a), in_f32=True)
    elif dtype == a.dtype:
        tx.alias(out, tx.tensor(a), in_f32=False)
    else:
        source = tx.f32[a.name] if tx.held_f32(a) else tx.tensor(a)
        tx.define(out, f"fd.ops.cast({source}, dtype={NV_DTYPES[dtype]})", dtype)
        if dtype is torch.float32 and a.dtype in LOW_PRECISION:
            tx.f32[a.name] = tx.var[out.name]


def _reduction(op: str) -> Translate:
    def translate(tx: Translator, bsym: BoundSymbol) -> None:
        a, dims = bsym.args
        compute = dtypes.compute_dtype(a.dtype)
        x = tx.compute(a, compute)
        held = tx.flags.get(a.name, ())
        if any(held[d] and not is_unit(a.shape[d]) for d in dims if d < len(held)):
            x = _materialized(tx, a, tx.sizes(a.shape))
        if not dims:
            expr = f"fd.ops.set({x})"
        elif op in ("sum", "prod") and a.dtype is torch.int32:
            expr = f"fd.ops.{op}({x}, dims={list(dims)}, dtype=DataType.Int32)"
        else:
            expr = f"fd.ops.{op}({x}, dims={list(dims)})"
        tx.define(bsym.output, expr, compute)

    return translate


def _data_movement(render: Callable[[Translator, str, BoundSymbol], str]) -> Translate:
    def translate(tx: Translator, bsym: BoundSymbol) -> None:
        x, held = tx.movable(bsym.args[0])
        tx.define(bsym.output, render(tx, x, bsym), held)

    return translate


def _slice(tx: Translator, x: str, bsym: BoundSymbol) -> str:
    # NOTE: the ops layer already normalised (and guarded) the bounds to 0 <= start <= end <= size,
    # so nvFuser's own normalisation (min(size, end) clamps) is off, and a dim kept whole ends at
    # the input's own extent: with constant ends, two slices of one input tripped an internal
    # assert in nvFuser's loop promotion (nvfuser_direct 0.2.36).
    # NOTE: a slice that makes a size-1 dim out of a longer one read the wrong rows in nvfuser_direct
    # 0.2.36 (on an H100 `a[-1:] * 1.5` gave `a[0] * 1.5`, bf16/f16/f32, found by GPU fuzzing);
    # behind a segment_set (its own segment) it is right. `_broadcast_in_dim` then adds no other.
    a, starts, ends, steps = bsym.args
    rendered = []
    for d, (start, end) in enumerate(zip(starts, ends)):
        whole = type(start) is int and start == 0 and (end is a.shape[d] or (type(end) is int and end == a.shape[d]))
        rendered.append(f"fd.ops.size({x}, dim={d})" if whole else tx.size(end))
    sliced = (
        f"fd.ops.slice({x}, start_indices={tx.sizes(starts)}, end_indices=[{', '.join(rendered)}], "
        f"strides={tx.sizes(steps)}, manual_normalization=True)"
    )
    if any(is_unit(s) and not is_unit(a.shape[d]) for d, s in enumerate(bsym.output.shape)):
        tx.segmented.add(bsym.output.name)
        return f"fd.ops.segment_set({tx.emit(f'{bsym.output.name}_slice', sliced)})"
    return sliced


def _broadcast_in_dim(tx: Translator, x: str, bsym: BoundSymbol) -> str:
    # NOTE: a size-1 iteration dim is removed behind a segment_set before it is broadcast: a slice's
    # by a squeeze, any other (squeeze and reshape fail on them) by a sum. See nvfuser_broadcast.py.
    a, shape, dims = bsym.args
    removed = _iteration_dims(tx, a, expanded_unit_dims(bsym))
    if removed:
        if a.name not in tx.segmented:
            x = tx.emit(f"{a.name}_seg", f"fd.ops.segment_set({x})")
        if _sliced_source(tx.region, a) is not None:
            x = tx.emit(f"{a.name}_sq", f"fd.ops.squeeze({x}, dims={removed})")
        else:
            x = tx.emit(f"{a.name}_sq", _sum_unit_dims(x, tx.movable(a)[1], removed))
        dims = [d for i, d in enumerate(dims) if i not in removed]
    return f"fd.ops.broadcast_in_dim({x}, shape={tx.sizes(shape)}, broadcast_dims={list(dims)})"


def _squeeze(tx: Translator, x: str, bsym: BoundSymbol) -> str:
    # NOTE: nvfuser_direct 0.2.36 fails an internal assert (loop promotion) on a squeezed slice of
    # a tensor the fusion also reads another way, e.g. `(a[1:3] * 2, a[0] + 1)`; a segment_set
    # before the squeeze (a segment boundary nvFuser accepts) avoids it. Seen on an H200.
    source = _sliced_source(tx.region, bsym.args[0])
    read_elsewhere = source is not None and sum(any(q is source for q in b.inputs) for b in tx.region.bsyms) > 1
    if read_elsewhere and bsym.args[0].name not in tx.segmented:
        x = tx.emit(f"{bsym.args[0].name}_seg", f"fd.ops.segment_set({x})")
    # NOTE: nvFuser squeezes broadcast dims only; a size-1 iteration dim that is not a slice's (a
    # gather's along an index declared with iteration dims, see nvfuser_broadcast.py) is summed
    # away, which is exact. Seen on an H200: cross-entropy under dynamo, whose targets come in.
    a, dims = bsym.args
    if source is None and _iteration_dims(tx, a, dims):
        return _sum_unit_dims(x, tx.movable(a)[1], list(dims))
    return f"fd.ops.squeeze({x}, dims={list(dims)})"


# NOTE: nvFuser has no bf16/fp16 addition: its reduction of such a tensor fails to compile (NVRTC:
# no operator "+" for __bfloat; seen on an H100, dynamo's bf16 cross-entropy). A sum of bools is
# not a bool, so bools are summed as int32.
_SUM_IN = {torch.bfloat16: torch.float32, torch.float16: torch.float32, torch.bool: torch.int32}


def _sum_unit_dims(x: str, dtype: torch.dtype, dims: list[int]) -> str:
    """`x` (held as `dtype`) without its size-1 `dims`, as a sum over them: exact, one element
    each. Summed in f32 (bf16, fp16) or int32 (bool) and cast back where nvFuser cannot add `dtype`."""
    wider = _SUM_IN.get(dtype)
    if wider is None:
        return f"fd.ops.sum({x}, dims={dims})"
    summed = f"fd.ops.sum(fd.ops.cast({x}, dtype={NV_DTYPES[wider]}), dims={dims})"
    return f"fd.ops.cast({summed}, dtype={NV_DTYPES[dtype]})"


def _iteration_dims(tx: Translator, a: TensorProxy, dims: Sequence[int]) -> list[int]:
    """Those of `dims` that nvFuser surely holds as iteration dims of `a` (see nvfuser_broadcast.py)."""
    held = tx.flags.get(a.name, ())
    return [d for d in dims if d < len(held) and not held[d]]


def _sliced_source(region: Region, p: TensorProxy) -> TensorProxy | None:
    """The tensor `p` was sliced from inside `region`, or None."""
    producer = next((b for b in region.bsyms if any(q is p for q in b.outputs)), None)
    return producer.args[0] if producer is not None and producer.sym is Prim.SLICE else None


def _cat(tx: Translator, bsym: BoundSymbol) -> None:
    tensors, dim = bsym.args
    in_f32 = all(tx.held_f32(t) for t in tensors)
    items = [tx.f32[t.name] if in_f32 else tx.tensor(t) for t in tensors]
    tx.define(
        bsym.output, f"fd.ops.cat([{', '.join(items)}], dim={dim})", torch.float32 if in_f32 else bsym.output.dtype
    )


def _full(tx: Translator, bsym: BoundSymbol) -> None:
    shape, value, dtype, _device = bsym.args
    fill = tx.operand(value, dtypes.compute_dtype(dtype))
    tx.define(bsym.output, f"fd.ops.full(shape={tx.sizes(shape)}, fill_value={fill}, dtype={NV_DTYPES[dtype]})", dtype)


def _iota(tx: Translator, bsym: BoundSymbol) -> None:
    length, start, step, dtype, _device = bsym.args
    args = f"{tx.size(length)}, {tx.operand(start, dtype)}, {tx.operand(step, dtype)}, {NV_DTYPES[dtype]}"
    tx.define(bsym.output, f"fd.ops.iota({args})", dtype)


def _matmul(tx: Translator, bsym: BoundSymbol) -> None:
    a, b = bsym.args
    tx.define(bsym.output, f"fd.ops.matmul({tx.tensor(a)}, {tx.tensor(b)})", bsym.output.dtype)


def _linear(tx: Translator, bsym: BoundSymbol) -> None:
    a, w, bias = bsym.args
    args = f"{tx.tensor(a)}, {tx.tensor(w)}" + ("" if bias is None else f", {tx.tensor(bias)}")
    tx.define(bsym.output, f"fd.ops.linear({args})", bsym.output.dtype)


def _copy_to(tx: Translator, bsym: BoundSymbol) -> None:
    computed, buffer = bsym.args
    target = tx.var.get(buffer.name)
    check(
        target in tx.inputs,
        lambda: f"{tx.region.name}: write-back target {buffer.name} is not an input of the fusion",
        TranslationError,
    )
    value = tx.tensor(computed)
    if tx.copied:
        tx.copied_values.append(value)
        return
    if any(tx.flags.get(computed.name, ())):
        sizes = ", ".join(f"fd.ops.size({target}, dim={d})" for d in range(len(computed.shape)))
        value = _materialized(tx, computed, f"[{sizes}]")
        if computed.dtype not in (torch.bool, dtypes.compute_dtype(computed.dtype)):
            value = tx.emit(f"{computed.name}_full_cast", f"fd.ops.cast({value}, dtype={NV_DTYPES[computed.dtype]})")
    tx.lines.append(f"fd.add_output(fd.ops.set({value}), alias_input={target})")


def _materialized(tx: Translator, p: TensorProxy, sizes: str) -> str:
    # NOTE: aliasing a value with (expanded) broadcast dims to an input, or reducing over one, went
    # wrong in nvfuser_direct 0.2.36 (see nvfuser_broadcast.py); adding zeros makes them iteration dims.
    dtype = p.dtype
    compute = dtypes.compute_dtype(dtype) if dtype is not torch.bool else torch.bool
    zero = _literal(0, compute)
    zeros = f"fd.ops.full(shape={sizes}, fill_value=fd.define_scalar({zero}, dtype={NV_DTYPES[compute]}), "
    zeros += f"dtype={NV_DTYPES[compute]})"
    op = "logical_or" if dtype is torch.bool else "add"
    return tx.emit(f"{p.name}_full", f"fd.ops.{op}({tx.compute(p, compute)}, {zeros})")


_UNARY_OPS = {p: p.value for p in UNARY} | {Prim.BITWISE_NOT: "bitwise_not"}
_BINARY_OPS = {p: p.value for p in BINARY - {Prim.FLOOR_DIVIDE}}

TRANSLATIONS: dict[Prim, Translate] = {
    **{p: _elementwise(op) for p, op in _UNARY_OPS.items()},
    **{p: _elementwise(op) for p, op in _BINARY_OPS.items()},
    Prim.BITWISE_NOT: _elementwise("bitwise_not", bool_op="logical_not"),
    Prim.BITWISE_AND: _elementwise("bitwise_and", bool_op="logical_and"),
    Prim.BITWISE_OR: _elementwise("bitwise_or", bool_op="logical_or"),
    Prim.BITWISE_XOR: _elementwise("bitwise_xor", bool_op="ne"),
    Prim.POW: _pow,
    Prim.WHERE: _where,
    Prim.CONVERT_ELEMENT_TYPE: _convert,
    Prim.SUM: _reduction("sum"),
    Prim.PROD: _reduction("prod"),
    Prim.AMAX: _reduction("max"),
    Prim.AMIN: _reduction("min"),
    Prim.BROADCAST_IN_DIM: _data_movement(_broadcast_in_dim),
    Prim.RESHAPE: _data_movement(lambda tx, x, b: f"fd.ops.reshape({x}, new_shape={tx.sizes(b.args[1])})"),
    Prim.PERMUTE: _data_movement(lambda tx, x, b: f"fd.ops.permute({x}, dims={list(b.args[1])})"),
    Prim.SLICE: _data_movement(_slice),
    Prim.SQUEEZE: _data_movement(_squeeze),
    Prim.CAT: _cat,
    Prim.INDEX_SELECT: _data_movement(
        lambda tx, x, b: f"fd.ops.index_select({x}, {tx.tensor(b.args[2])}, dim={b.args[1]})"
    ),
    # NOTE: torch.gather semantics (index may be smaller than the input off `dim`) is nvFuser's
    # gather; take_along_axis failed shape inference for such outputs on nvfuser_direct 0.2.36.
    Prim.TAKE_ALONG_DIM: _data_movement(lambda tx, x, b: f"fd.ops.gather({x}, {tx.tensor(b.args[1])}, {b.args[2]})"),
    Prim.FULL: _full,
    Prim.IOTA: _iota,
    Prim.MATMUL: _matmul,
    Prim.LINEAR: _linear,
    Prim.COPY_TO: _copy_to,
}


def fusion_source(
    region: Region, descriptors: Sequence[TensorDesc | ScalarDesc] | None = None
) -> tuple[str, str, set[str]]:
    """(source of `def <fn>(fd)`, fn name, names of scalar inputs used as sizes) for `region`."""
    if descriptors is None:
        iteration = iteration_inputs(region)
        descriptors = [default_descriptor(p, p.name in iteration) for p in region.inputs]
    tx = Translator(region, descriptors)
    for bsym in region.bsyms:
        translate = TRANSLATIONS.get(bsym.sym)
        check(
            translate is not None,
            lambda bsym=bsym: f"{region.name}: no translation for {callee_name(bsym.sym)}",
            TranslationError,
        )
        translate(tx, bsym)
        for out in bsym.outputs:
            if isinstance(out, TensorProxy):
                tx.flags[out.name] = output_flags(bsym, tx.flags)
    fn_name = region.name.lower().replace("nvfusion", "nvfusion_")
    return tx.finish(fn_name), fn_name, tx.shape_scalars
