"""Translation of prims to `nvfuser_direct`: a region becomes the Python source of a fusion definition.

The source is a function `def nvfusion0(fd): ...` that calls `fd.define_tensor`,
`fd.define_scalar`, `fd.ops.*` and `fd.add_output`; it is exec'd against `nvfuser_direct` on the
GPU, compared as text in CPU golden tests, and pasted verbatim into repro scripts. Nothing here
imports nvFuser.

The DefinitionWriter that holds the definition being written, and the conventions of the code it
writes, are in nvfuser_translator.py; this module has the table of per-prim translations.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch

from compiler.core import dtypes
from compiler.core.errors import check
from compiler.core.executor import Region
from compiler.core.ir import BoundSymbol, TensorProxy, callee_name, is_unit
from compiler.core.proxies import same_extent
from compiler.executors.nvfuser.define.broadcast import iteration_inputs, output_flags
from compiler.executors.nvfuser.define.dependencies import computed_from, has_cat, reduced_inside, sliced_source
from compiler.executors.nvfuser.define.descriptors import (  # noqa: F401  (re-exported for callers)
    ScalarDesc,
    TensorDesc,
    default_descriptor,
    describe,
    layout_descriptor,
    shape_spec,
    tensor_descriptor,
)
from compiler.executors.nvfuser.define.fills import fill_beside, only_beside, pad_of_fills
from compiler.executors.nvfuser.define.writer import (  # noqa: F401  (re-exported for callers)
    LOW_PRECISION,
    NV_DTYPES,
    SCALAR_DTYPES,
    DefinitionWriter,
    TranslationError,
    literal,
)
from compiler.prims import BINARY, EXACT_OPERANDS, REDUCTIONS, ROUNDING_DECIDES, UNARY, VIEWS, Prim, expanded_unit_dims

Translate = Callable[[DefinitionWriter, BoundSymbol], None]

# ---------------------------------------------------------------------------------------------
# The table


def _elementwise(op: str, bool_op: str | None = None) -> Translate:
    def translate(tx: DefinitionWriter, bsym: BoundSymbol) -> None:
        first = next(a for a in bsym.args if isinstance(a, TensorProxy))
        name = bool_op if bool_op is not None and first.dtype is torch.bool else op
        compute = dtypes.compute_dtype(first.dtype)
        read = tx.exact_operand if bsym.sym in EXACT_OPERANDS else tx.operand
        args = ", ".join(read(a, compute) for a in bsym.args)
        out = bsym.output
        tx.define(out, f"fd.ops.{name}({args})", compute if out.dtype == first.dtype else out.dtype)

    return translate


def _pow(tx: DefinitionWriter, bsym: BoundSymbol) -> None:
    base, exponent = bsym.args
    if isinstance(base, TensorProxy) and type(exponent) in (int, float) and exponent in (2, 3):
        # NOTE: torch's pow computes x**2 and x**3 by multiplication; so does a hand-written fusion.
        x = tx.compute(base, dtypes.compute_dtype(base.dtype))
        expr = f"fd.ops.mul({x}, {x})" if exponent == 2 else f"fd.ops.mul(fd.ops.mul({x}, {x}), {x})"
        tx.define(bsym.output, expr, dtypes.compute_dtype(base.dtype))
    else:
        _elementwise("pow")(tx, bsym)


def _where(tx: DefinitionWriter, bsym: BoundSymbol) -> None:
    condition, a, b = bsym.args
    compute = dtypes.compute_dtype(bsym.output.dtype)
    args = f"{tx.operand(condition, torch.bool)}, {tx.operand(a, compute)}, {tx.operand(b, compute)}"
    tx.define(bsym.output, f"fd.ops.where({args})", compute)


def _convert(tx: DefinitionWriter, bsym: BoundSymbol) -> None:
    a, dtype = bsym.args
    out = bsym.output
    if dtype is torch.float32 and a.dtype in LOW_PRECISION and a.name in tx.f32:
        tx.alias(out, tx.f32[a.name], in_f32=False)
        tx.upcast_of[out.name] = a
    elif dtype in LOW_PRECISION and a.dtype is torch.float32 and out.name not in tx.rounded_on_purpose:
        tx.alias(out, tx.tensor(a), in_f32=True)
    elif dtype == a.dtype:
        tx.alias(out, tx.tensor(a), in_f32=False)
    else:
        # NOTE: to an integer, bool, float64 or the other 16-bit dtype, a bf16/fp16 value converts as
        # its own dtype holds it, as eager's does (`x.half().double()` keeps fp16's rounding); only
        # the round trip through fp32 is dropped
        tx.define(out, f"fd.ops.cast({tx.tensor(a)}, dtype={NV_DTYPES[dtype]})", dtype)
        if dtype is torch.float32 and a.dtype in LOW_PRECISION:
            tx.f32[a.name] = tx.var[out.name]
            tx.exact.add(a.name)  # cast up from its own dtype's value


def _reduction(op: str) -> Translate:
    def translate(tx: DefinitionWriter, bsym: BoundSymbol) -> None:
        a, dims = bsym.args
        compute = dtypes.compute_dtype(a.dtype)
        # NOTE: a max reads the value eager rounds (as its backward's `x == max(x)` does)
        x = tx.exact_operand(a, compute) if bsym.sym in ROUNDING_DECIDES else tx.compute(a, compute)
        # NOTE: over an expanded broadcast dim, or keeping one, nvFuser 0.2.36 returned the wrong
        # shape (the keepdim amax of `x.expand(3, 4)` unreduced; `x.expand(3, 4).sum(-1)` of shape [1])
        if _holds_expanded(tx, a):
            x = _materialized(tx, a, tx.extents_of(a.shape))
        if not dims:
            expr = f"fd.ops.set({x})"
        elif op in ("sum", "prod") and a.dtype is torch.int32:
            expr = f"fd.ops.{op}({x}, dims={list(dims)}, dtype=DataType.Int32)"
        else:
            expr = f"fd.ops.{op}({x}, dims={list(dims)})"
        tx.define(bsym.output, expr, compute)

    return translate


def _data_movement(render: Callable[[DefinitionWriter, str, BoundSymbol], str]) -> Translate:
    def translate(tx: DefinitionWriter, bsym: BoundSymbol) -> None:
        x, held = tx.movable(bsym.args[0])
        tx.define(bsym.output, render(tx, x, bsym), held)

    return translate


def _reshape(tx: DefinitionWriter, bsym: BoundSymbol) -> None:
    # NOTE: nvfuser_direct 0.2.36 gave wrong values for a reshape that merges an expanded broadcast
    # dim (GQA's repeat_kv: `k[:, :, None].expand(b, h, 2, n, d).reshape(b, 2 * h, n, d)`) in a
    # fusion that segments, after its sizes went symbolic; the expanded value is materialised first.
    # NOTE: and nvfuser_direct 0.2.36 computed garbage (probabilities up to 12, H200) reshaping back
    # a value computed from such a materialised merge (Bloom's decode: the alibi
    # `slopes[:, None] * arange(n)` broadcast over the batch, merged to [b * h, 1, n], added to the
    # scores, split to [b, h, 1, n] for the softmax); behind a segment_set it is right.
    a, shape = bsym.args
    if _holds_expanded(tx, a):
        x, held = _materialized(tx, a, tx.extents_of(a.shape)), _materialized_dtype(a.dtype)
        tx.merged_broadcasts.add(bsym.output.name)
    else:
        x, held = tx.movable(a)
        if tx.merged_broadcasts and computed_from(tx.region, a, (), names=tx.merged_broadcasts):
            x = tx.segment(a, x)
        elif any(is_unit(size) for size in a.shape):
            x = _past_reduction(tx, a, x)
    tx.define(bsym.output, f"fd.ops.reshape({x}, new_shape={tx.sizes(shape)})", held)


def _past_reduction(tx: DefinitionWriter, a: TensorProxy, x: str) -> str:
    # NOTE: nvfuser_direct 0.2.36 counts a reduction output's reduced dims among the positions it
    # squeezes: squeezing (or reshaping away) a size-1 dim of a sum's output fails ("Squeezed
    # IterDomain iS{12} must concretize to IterType::Broadcast": DeBERTa's backward sums a
    # [8, 12, 1, 16, 1, 64] gradient over dim 0 and reshapes it to [1, 12, 16, 64]); squeezing a
    # copy made by fd.ops.set, which has no reduced dims, is right.
    return tx.emit(f"{a.name}_set", f"fd.ops.set({x})") if reduced_inside(tx.region, a) else x


def _holds_expanded(tx: DefinitionWriter, a: TensorProxy) -> bool:
    """True when nvFuser may hold a dim of `a` of a size other than 1 as a broadcast dim (an
    expanded input's stride-0 dim, a size-1 dim broadcast to another size)."""
    return any(f and not is_unit(size) for f, size in zip(tx.flags.get(a.name, ()), a.shape))


def _take_along_dim(tx: DefinitionWriter, x: str, bsym: BoundSymbol) -> str:
    # NOTE: nvFuser's take_along_axis fuses with the ops around it, where its gather (torch.gather
    # semantics) runs as its own ATen segment: three kernels for a cross_entropy's target logits.
    # nvfuser_direct 0.2.36's take_along_axis is right only for an index of the input's sizes off
    # `dim` (a smaller one fails its shape inference) and an input that the fusion reads
    # (gathering from a value computed inside fails an internal assert); others use `gather`.
    a, index, dim = bsym.args
    exact = all(same_extent(i, s) for d, (i, s) in enumerate(zip(index.shape, a.shape)) if d != dim)
    read = any(a is p for p in tx.region.inputs)
    return f"fd.ops.{'take_along_axis' if exact and read else 'gather'}({x}, {tx.tensor(index)}, {dim})"


def _slice(tx: DefinitionWriter, x: str, bsym: BoundSymbol) -> str:
    # NOTE: the ops layer already normalised (and guarded) the bounds to 0 <= start <= end <= size,
    # so nvFuser's own normalisation (min(size, end) clamps) is off, and a dim kept whole ends at
    # the input's own extent: with constant ends, two slices of one input tripped an internal
    # assert in nvFuser's loop promotion (nvfuser_direct 0.2.36).
    # NOTE: nvfuser_direct 0.2.36 reads the wrong rows for a slice that makes a size-1 dim out of a
    # longer one (`a[-1:] * 1.5` gives `a[0] * 1.5` in bf16/f16/f32, found by GPU fuzzing);
    # behind a segment_set (its own segment) it is right. `_broadcast_in_dim` then adds no other.
    # NOTE: nvfuser_direct 0.2.36 fails an exact-mapping assert in lowering (fusion.cpp:1020,
    # `Invalid domains to map: iS{getMetaData(T2).logical_size[0]}, iS{i5}`) on a slice of a tensor
    # computed from a broadcast when the fusion also cats (a rotary backward:
    # `cat(u[..., 16:], -u[..., :16])` of `u = grad * sin`, with symbolic sizes, however the ends
    # are spelled), or of one computed from an input nvFuser holds as broadcast (the same backward
    # where the forward's fusion returned `sin` broadcast over the heads: an expanded tensor; GPU
    # sizes of Gemma-2). Behind a segment_set (the slices' own segment) it compiles.
    # NOTE: but nvfuser_direct 0.2.36 computed wrong rows (past the second) with that segment_set
    # before the slices of a value computed through a reduction (Qwen3's q/k RMSNorm, then the
    # rotary embedding, in fp32, H200); without it that fusion is right and compiles.
    a, starts, ends, steps = bsym.args
    region = tx.region
    if (
        has_cat(region)
        and computed_from(region, a, {Prim.BROADCAST_IN_DIM}, leaf=lambda p: _holds_expanded(tx, p))
        and not computed_from(region, a, REDUCTIONS)
    ):
        x = tx.segment(a, x)
    rendered = []
    for d, (start, end) in enumerate(zip(starts, ends)):
        whole = type(start) is int and start == 0 and same_extent(end, a.shape[d])
        rendered.append(f"fd.ops.size({x}, dim={d})" if whole else tx.size(end))
    sliced = (
        f"fd.ops.slice({x}, start_indices={tx.sizes(starts)}, end_indices=[{', '.join(rendered)}], "
        f"strides={tx.sizes(steps)}, manual_normalization=True)"
    )
    if any(is_unit(s) and not is_unit(a.shape[d]) for d, s in enumerate(bsym.output.shape)):
        # NOTE: nvfuser_direct 0.2.36's segmenter refuses a squeeze behind that segment_set where a
        # reduction follows (in the next segment the dim's extent is the input's, not known to be 1:
        # "Can not squeeze dimension(s) with size != 1", alias.cpp:338). A slice only squeezed is
        # squeezed first and segmented after (`_squeeze`): that compiles and reads the right rows
        # (H200: f32, bf16; first, middle, last rows; a reduction after or not; a source also sliced
        # otherwise, `(a[1:3, 2:20] * 2, a[0] + 1)`, or into several such parts, a fused QKV's).
        readers = [b for b in region.bsyms if any(q is bsym.output for q in b.inputs)]
        if (
            readers
            and all(b.sym is Prim.SQUEEZE for b in readers)
            and all(p is not bsym.output for p in region.outputs)
        ):
            tx.squeeze_first.add(bsym.output.name)
            return sliced
        # NOTE: any other reader gets the slice squeezed, segmented and broadcast back: its size-1
        # dims are then broadcast dims. Kept as iteration dims behind the segment_set, a broadcast of
        # them later (Falcon's key and value head, `qkv[..., [-2], :]`, expanded over the query heads
        # for attention) is squeezed or summed in the next segment, which the segmenter refuses
        # ("Can not squeeze dimension(s) with size != 1", alias.cpp:338).
        out = bsym.output
        units = [d for d, s in enumerate(out.shape) if is_unit(s) and not is_unit(a.shape[d])]
        squeezed = tx.emit(f"{out.name}_sq", f"fd.ops.squeeze({tx.emit(f'{out.name}_slice', sliced)}, dims={units})")
        tx.segmented.add(out.name)
        tx.rebroadcast.add(out.name)
        kept = [d for d in range(out.ndim) if d not in units]
        shape = tx.extents_of(out.shape)
        return f"fd.ops.broadcast_in_dim(fd.ops.segment_set({squeezed}), shape={shape}, broadcast_dims={kept})"
    return sliced


def _read_elsewhere(region: Region, p: TensorProxy) -> bool:
    """Whether more than one prim of `region` reads `p`."""
    return sum(any(q is p for q in b.inputs) for b in region.bsyms) > 1


def _broadcast_in_dim(tx: DefinitionWriter, x: str, bsym: BoundSymbol) -> str:
    # NOTE: a size-1 iteration dim is removed behind a segment_set before it is broadcast: a slice's
    # by a squeeze, any other (squeeze and reshape fail on them) by a sum. See nvfuser_broadcast.py.
    a, shape, dims = bsym.args
    removed = _iteration_dims(tx, a, expanded_unit_dims(bsym))
    if removed:
        if a.name not in tx.segmented:
            x = tx.emit(f"{a.name}_seg", f"fd.ops.segment_set({x})")
        if sliced_source(tx.region, a) is not None:
            x = tx.emit(f"{a.name}_sq", f"fd.ops.squeeze({x}, dims={removed})")
        else:
            x = tx.emit(f"{a.name}_sq", _sum_unit_dims(x, tx.movable(a)[1], removed))
        dims = [d for i, d in enumerate(dims) if i not in removed]
    # NOTE: in a region with a cat, a static shape is written as the trace's numbers: nvFuser then
    # knows the extents the cat's indexing divides by, which it otherwise computes at run time
    # (a rotary embedding's cat is markedly slower so). Such a definition is not shared with a
    # symbolic entry's.
    if has_cat(tx.region) and all(type(s) is int for s in shape):
        return f"fd.ops.broadcast_in_dim({x}, shape={list(shape)}, broadcast_dims={list(dims)})"
    # NOTE: a dim the operand has as an iteration dim keeps the operand's size: written as that
    # size (not the trace's number), constant and symbolic sizes give one definition (module doc).
    held = tx.flags.get(a.name, ())
    kept = [k for k in range(len(a.shape)) if k not in removed]
    iterated = [not is_unit(a.shape[k]) and not (k < len(held) and held[k]) for k in kept]
    own = {d: i for i, d in enumerate(dims) if iterated[i]}
    sizes = [f"fd.ops.size({x}, dim={own[d]})" if d in own else tx.extent(s) for d, s in enumerate(shape)]
    return f"fd.ops.broadcast_in_dim({x}, shape=[{', '.join(sizes)}], broadcast_dims={list(dims)})"


def _squeeze(tx: DefinitionWriter, x: str, bsym: BoundSymbol) -> str:
    # NOTE: nvfuser_direct 0.2.36 fails an internal assert (loop promotion) on a squeezed slice of
    # a tensor the fusion also reads another way, e.g. `(a[1:3] * 2, a[0] + 1)`; a segment_set
    # before the squeeze (a segment boundary nvFuser accepts) avoids it.
    a, dims = bsym.args
    if a.name in tx.squeeze_first:
        return f"fd.ops.segment_set(fd.ops.squeeze({x}, dims={list(dims)}))"
    source = sliced_source(tx.region, a)
    if source is not None and _read_elsewhere(tx.region, source) and a.name not in tx.segmented:
        x = tx.emit(f"{a.name}_seg", f"fd.ops.segment_set({x})")
    # NOTE: nvFuser squeezes broadcast dims only; a size-1 iteration dim that is not a slice's (a
    # gather's along an index declared with iteration dims, see broadcast.py; cross-entropy under
    # dynamo gathers so along its targets) is summed away, which is exact.
    if source is None and _iteration_dims(tx, a, dims):
        return _sum_unit_dims(x, tx.movable(a)[1], list(dims))
    return f"fd.ops.squeeze({_past_reduction(tx, a, x)}, dims={list(dims)})"


# NOTE: nvfuser_direct 0.2.36 has no bf16/fp16 addition: its reduction of such a tensor fails to
# compile (NVRTC: no operator "+" for __bfloat; dynamo's bf16 cross-entropy reduces so). A sum of
# bools is not a bool, so bools are summed as int32.
_SUM_IN = {torch.bfloat16: torch.float32, torch.float16: torch.float32, torch.bool: torch.int32}


def _sum_unit_dims(x: str, dtype: torch.dtype, dims: list[int]) -> str:
    """`x` (held as `dtype`) without its size-1 `dims`, as a sum over them: exact, one element
    each. Summed in f32 (bf16, fp16) or int32 (bool) and cast back where nvFuser cannot add `dtype`."""
    wider = _SUM_IN.get(dtype)
    if wider is None:
        return f"fd.ops.sum({x}, dims={dims})"
    summed = f"fd.ops.sum(fd.ops.cast({x}, dtype={NV_DTYPES[wider]}), dims={dims})"
    return f"fd.ops.cast({summed}, dtype={NV_DTYPES[dtype]})"


def _iteration_dims(tx: DefinitionWriter, a: TensorProxy, dims: Sequence[int]) -> list[int]:
    """Those of `dims` that nvFuser surely holds as iteration dims of `a` (see nvfuser_broadcast.py)."""
    held = tx.flags.get(a.name, ())
    return [d for d in dims if d < len(held) and not held[d]]


def _cat(tx: DefinitionWriter, bsym: BoundSymbol) -> None:
    """A cat of bf16/fp16 pieces of which any is held in fp32 is done in fp32, the others cast up.

    Rotary's `cat((-q[..., h:], q[..., :h]))` negates in fp32: rounding that piece to bf16 just to
    cat it adds a conversion to nvFuser's resize kernel, which makes it slower, not faster.
    """
    tensors, dim = bsym.args
    in_f32 = bsym.output.dtype in LOW_PRECISION and any(tx.held_f32(t) for t in tensors)
    fills = {id(b.output): b for b in tx.region.bsyms if b.sym is Prim.FULL}
    kept = [t for t in tensors if id(t) not in fills] or list(tensors)
    made = {id(t): tx.compute(t, torch.float32) if in_f32 else tx.tensor(t) for t in kept}
    dtype = torch.float32 if in_f32 else bsym.output.dtype
    padded = pad_of_fills(tx, [fills.get(id(t)) for t in tensors], [made.get(id(t)) for t in tensors], dim, dtype)
    if padded is not None:
        tx.define(bsym.output, padded, dtype)
        return
    items = [made.get(id(t)) or fill_beside(tx, fills[id(t)], made[id(kept[0])], dim, dtype) for t in tensors]
    tx.define(bsym.output, f"fd.ops.cat([{', '.join(items)}], dim={dim})", dtype)


def _full(tx: DefinitionWriter, bsym: BoundSymbol) -> None:
    shape, value, dtype, _device = bsym.args
    if only_beside(tx.region, bsym.output):
        return  # NOTE: each cat reading it makes its own (`fills.fill_beside`): this one would be dead
    fill = tx.operand(value, dtypes.compute_dtype(dtype))
    expr = f"fd.ops.full(shape={tx.extents_of(shape)}, fill_value={fill}, dtype={NV_DTYPES[dtype]})"
    tx.define(bsym.output, expr, dtype)


def _iota(tx: DefinitionWriter, bsym: BoundSymbol) -> None:
    length, start, step, dtype, _device = bsym.args
    args = f"{tx.size(length)}, {tx.operand(start, dtype)}, {tx.operand(step, dtype)}, {NV_DTYPES[dtype]}"
    tx.define(bsym.output, f"fd.ops.iota({args})", dtype)


def _matmul(tx: DefinitionWriter, bsym: BoundSymbol) -> None:
    a, b = bsym.args
    tx.define(bsym.output, f"fd.ops.matmul({tx.tensor(a)}, {tx.tensor(b)})", bsym.output.dtype)


def _linear(tx: DefinitionWriter, bsym: BoundSymbol) -> None:
    a, w, bias = bsym.args
    args = f"{tx.tensor(a)}, {tx.tensor(w)}" + ("" if bias is None else f", {tx.tensor(bias)}")
    tx.define(bsym.output, f"fd.ops.linear({args})", bsym.output.dtype)


def _copy_to(tx: DefinitionWriter, bsym: BoundSymbol) -> None:
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
        value = _materialized_in_own_dtype(tx, computed, f"[{sizes}]")
    tx.lines.append(f"fd.add_output(fd.ops.set({value}), alias_input={target})")


def _materialized_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype `_materialized` returns a value of `dtype` in."""
    return dtypes.compute_dtype(dtype) if dtype is not torch.bool else torch.bool


def _materialized(tx: DefinitionWriter, p: TensorProxy, sizes: str) -> str:
    # NOTE: aliasing a value with (expanded) broadcast dims to an input, or reducing over one, went
    # wrong in nvfuser_direct 0.2.36 (see nvfuser_broadcast.py); adding zeros makes them iteration dims.
    dtype = p.dtype
    compute = _materialized_dtype(dtype)
    zero = literal(0, compute)
    zeros = f"fd.ops.full(shape={sizes}, fill_value=fd.define_scalar({zero}, dtype={NV_DTYPES[compute]}), "
    zeros += f"dtype={NV_DTYPES[compute]})"
    op = "logical_or" if dtype is torch.bool else "add"
    return tx.emit(f"{p.name}_full", f"fd.ops.{op}({tx.compute(p, compute)}, {zeros})")


def _materialized_in_own_dtype(tx: DefinitionWriter, p: TensorProxy, sizes: str) -> str:
    """`_materialized`, cast back to `p`'s dtype where it computed in another (fp32 for bf16/fp16)."""
    value = _materialized(tx, p, sizes)
    if p.dtype == _materialized_dtype(p.dtype):
        return value
    return tx.emit(f"{p.name}_full_cast", f"fd.ops.cast({value}, dtype={NV_DTYPES[p.dtype]})")


def _floor_divide(tx: DefinitionWriter, bsym: BoundSymbol) -> None:
    # NOTE: nvFuser's remainder takes the divisor's sign (as torch's floor division does), so
    # a - remainder(a, b) is a multiple of b and dividing it is exact whatever div's rounding.
    a, b = bsym.args
    compute = dtypes.compute_dtype(bsym.output.dtype)
    x, y = tx.operand(a, compute), tx.operand(b, compute)
    tx.define(bsym.output, f"fd.ops.div(fd.ops.sub({x}, fd.ops.remainder({x}, {y})), {y})", compute)


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
    Prim.FLOOR_DIVIDE: _floor_divide,
    Prim.WHERE: _where,
    Prim.CONVERT_ELEMENT_TYPE: _convert,
    Prim.SUM: _reduction("sum"),
    Prim.PROD: _reduction("prod"),
    Prim.AMAX: _reduction("max"),
    Prim.AMIN: _reduction("min"),
    Prim.BROADCAST_IN_DIM: _data_movement(_broadcast_in_dim),
    Prim.RESHAPE: _reshape,
    Prim.PERMUTE: _data_movement(lambda tx, x, b: f"fd.ops.permute({x}, dims={list(b.args[1])})"),
    Prim.SLICE: _data_movement(_slice),
    Prim.SQUEEZE: _data_movement(_squeeze),
    Prim.CAT: _cat,
    Prim.INDEX_SELECT: _data_movement(
        lambda tx, x, b: f"fd.ops.index_select({x}, {tx.tensor(b.args[2])}, dim={b.args[1]})"
    ),
    Prim.TAKE_ALONG_DIM: _data_movement(_take_along_dim),
    Prim.FULL: _full,
    Prim.IOTA: _iota,
    Prim.MATMUL: _matmul,
    Prim.LINEAR: _linear,
    Prim.COPY_TO: _copy_to,
}


def _dense_outputs(tx: DefinitionWriter) -> None:
    """Returns dense each output that eager computes into new memory (any prim but a view) and that
    nvFuser would hold with a broadcast dim of a size other than 1: nvFuser returns such a value
    expanded (stride 0), where eager's is dense, so torch would copy it when it reshapes it (GQA's
    `repeat_kv`: `k[:, :, None].expand(...).reshape(...)`, one copy kernel per key and value per
    layer) and could not write into it. Views keep eager's stride 0; a reduction's operand is
    materialised already (`_reduction`)."""
    producers = {out.name: b.sym for b in tx.region.bsyms for out in b.outputs if isinstance(out, TensorProxy)}
    for p in tx.region.outputs:
        producer = producers.get(p.name) if isinstance(p, TensorProxy) else None
        if producer is None or producer in VIEWS | REDUCTIONS or not _holds_expanded(tx, p):
            continue
        tx.var[p.name] = _materialized_in_own_dtype(tx, p, tx.extents_of(p.shape))


class FusionSource(NamedTuple):
    """A region's fusion definition as source."""

    source: str  # `def <fn_name>(fd): ...`
    fn_name: str
    shape_scalars: set[str]  # names of the scalar inputs it uses as sizes
    taken: list[int]  # the region inputs it takes, in order (not the scalar inputs it does not read)


def fusion_source(region: Region, descriptors: Sequence[TensorDesc | ScalarDesc] | None = None) -> FusionSource:
    """The fusion definition of `region` for inputs of these descriptors (defaults: the region's own)."""
    if descriptors is None:
        iteration = iteration_inputs(region)
        descriptors = [default_descriptor(p, p.name in iteration) for p in region.inputs]
    tx = DefinitionWriter(region, descriptors)
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
                if out.name in tx.rebroadcast:
                    tx.flags[out.name] = tuple(f or is_unit(s) for f, s in zip(tx.flags[out.name], out.shape))
    _dense_outputs(tx)
    fn_name = region.name.lower().replace("nvfusion", "nvfusion_")
    source = tx.finish(fn_name)
    return FusionSource(source, fn_name, tx.shape_scalars, tx.taken)
