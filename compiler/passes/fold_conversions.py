"""fold_conversions: exact rewrites of conversion and reshape chains, so that each way users write
the same work reaches the fusion partition as the same prims.

Assumes: a flattened, pure trace, right before `fuse` (after autodiff: moved before a gather
of repeated indices, an upcast would make its VJP accumulate in the narrow dtype). Guarantees:
every value is unchanged, bit for bit; the trace's outputs and write-back values are produced as
before (never replaced by a trace input, a view or another output, where that would alias what
eager returns apart or keep a larger intermediate alive). The rules, one per prim (`RULES`):

- `convert(convert(x, d1), d2)` is `convert(x, d2)` where `x.dtype -> d1` is exact
  (`x.float().to(bf16)` of a bf16 `x` is `x`); a conversion to the dtype a value already has is
  that value. A first step that rounds (`f32 -> bf16 -> f32`) is kept: its rounding is the result.
- `reshape(reshape(x, a), b)` is `reshape(x, b)`, and a reshape to `x`'s own shape is `x` (a
  view of a view of `x` is a view of `x`; prims.reshape always views). A reshape of a conversion
  that nothing else reads is the conversion of the reshape (`_sinks_below_reshape` says when).
- A gather (`take_along_dim`, `index_select`) of `convert(x, d)` is `convert(gather(x), d)`: a
  conversion is elementwise, so it commutes with picking elements.
- A conversion, reshape or gather (`take_along_dim`, `index_select`) of `full(shape, v)` is a
  `full` of its result's shape, `v` converted (`torch.ones(b, s).bool()` flattened and indexed
  by position, transformers' padding mask when the call passes none, is `full(True)`).
- An elementwise prim of fills (and numbers) whose value torch computes exactly on every device
  (`EXACT_ON_CONSTANTS`: comparisons, `where`, integer and correctly rounded arithmetic) is a
  `full` of that value: `x[..., [-2]]` makes its index `where(i < 0, i + n, i)` of `full(-2)`;
  so is a cat of fills of one value (`x[:, [0, 0]]`'s index).
- An `index_select` by `full([n], k)` picks the slice `k : k + 1`, broadcast to `n` where `n > 1`
  (Falcon's key and value heads, `qkv[:, :, :, [-2]]`): nvFuser slices where it gathered by an
  index its fusion read as an input.
- A `take_along_dim` by one index column broadcast over the other dims
  (`a.gather(dim, idx[:, None].expand(-1, n))`, Funnel's relative positions) is `index_select`
  by the column: nvFuser reads the column, and a kernel boundary never meets the broadcast index.
- An `index_select` by `iota(n, start, step)` (`embedding(arange(n))`, a position table read
  whole) is a slice, or the table itself where it picks all of it.
- `permute(slice(permute(x, p)), q)` is a slice of `x`, permuted by `p` then `q` where they do
  not cancel (advanced indexing's round trip of the indexed dim, once its pick is a slice).
- `device_put(full(..., d1), d2)` is `full(..., d2)` (and so for `iota`): a constant built on the
  CPU and moved (`torch.tensor(window).to(x.device)`, a 0-d CPU operand) is built where it is used.
- `x * 1`, `1 * x` and `x / 1` are `x` (exact in every dtype): a rotary embedding's
  `cos * attention_scaling` of 1, which otherwise makes a fusion read and write a value it could
  pass on (the key and value gradients of an attention backward).

Why: `F.cross_entropy(logits.float(), target)` gathers the target logits from the float32 copy
of the bf16 logits. nvFuser gathers in-fusion (`take_along_axis`) only from a value the fusion
reads, and otherwise runs `gather` as a kernel of its own, which reads the float32 copy written
out by another kernel: twice the loss's bytes and more. Written as `logits` viewed and viewed
back, or as `.to(float32).to(dtype).float()`, the gather reads a reshape or a conversion chain
of the input, with the same effect. Folded, every form gathers from the input itself, as the
loss written without the upcast does.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from compiler.core.context import TraceContext
from compiler.core.ir import BoundSymbol, Proxy, TensorProxy, Trace, map_proxies
from compiler.core.proxies import is_unit, same_extent
from compiler.passes import trace_pass
from compiler.passes.dce import dce
from compiler.passes.returned import returned_memory, shown_output
from compiler.prims import COMPARISONS, GATHERS, VIEWS, Prim, evaluate

_SMALL_INTS = (torch.uint8, torch.int8)
_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

# dtype -> the dtypes that hold each of its values exactly (so converting there and on is the
# same as converting on directly). bf16 and fp16 hold every integer up to 256 in magnitude.
EXACT_IN: dict[torch.dtype, frozenset[torch.dtype]] = {
    torch.bool: frozenset({torch.int16, torch.int32, torch.int64, *_SMALL_INTS, *_FLOATS}),
    torch.uint8: frozenset({torch.int16, torch.int32, torch.int64, *_FLOATS}),
    torch.int8: frozenset({torch.int16, torch.int32, torch.int64, *_FLOATS}),
    torch.int16: frozenset({torch.int32, torch.int64, torch.float32, torch.float64}),
    torch.int32: frozenset({torch.int64, torch.float64}),
    torch.float16: frozenset({torch.float32, torch.float64}),
    torch.bfloat16: frozenset({torch.float32, torch.float64}),
    torch.float32: frozenset({torch.float64}),
}


def is_exact(source: torch.dtype, target: torch.dtype) -> bool:
    """Whether converting `source` values to `target` never changes a value."""
    return source == target or target in EXACT_IN.get(source, frozenset())


def _same_shape(a: tuple, b: Any) -> bool:
    # NOTE: sizes compare by identity or as ints: `==` on a NumberProxy would record a guard.
    b = tuple(b)
    return len(a) == len(b) and all(x is y or (type(x) is int and type(y) is int and x == y) for x, y in zip(a, b))


class _Folder:
    """The state of one run: who produced each value (after rewriting), which values are trace
    inputs or views, and which are returned or written back."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.context: TraceContext | None = None  # made on first need: collecting names walks the trace
        self.producer: dict[str, BoundSymbol] = {}
        self.returned = returned_memory(trace, shown_output(trace))  # and what returned views view
        self.written = {b.args[0].name for b in trace.bsyms if b.sym is Prim.COPY_TO and isinstance(b.args[0], Proxy)}
        self.shared = {p.name for p in trace.inputs}  # inputs and views: memory a returned value may not share
        self.readers: dict[str, int] = {}
        for bsym in trace.bsyms:
            for name in {p.name for p in bsym.inputs}:
                self.readers[name] = self.readers.get(name, 0) + 1

    def handed_out(self, value: Proxy) -> bool:
        """Whether the caller gets `value`'s memory: it is returned (or viewed by what is) or
        written back."""
        return value.name in self.returned or value.name in self.written

    def produced_by(self, value: Any, prim: Prim) -> BoundSymbol | None:
        if not isinstance(value, TensorProxy):
            return None
        bsym = self.producer.get(value.name)
        return bsym if bsym is not None and bsym.sym is prim else None

    def may_stand_for(self, value: Proxy, existing: Proxy) -> bool:
        """Whether `existing` may take `value`'s place: a write-back owns its value (nothing else
        may read it), and an output must not become an input, a view (of an input or of a larger
        intermediate it would keep alive) or another output where eager returns a tensor of its own
        (`zeros(...).copy_(x[-k:])`, a cache's new state, functionalizes to a copy of the view)."""
        if value.name in self.written:
            return False
        return value.name not in self.returned or not (
            existing.name in self.shared or existing.name in self.returned or existing.name in self.written
        )

    def record(self, bsym: BoundSymbol) -> None:
        for p in bsym.outputs:
            self.producer[p.name] = bsym
        if bsym.sym in VIEWS:
            self.shared.update(p.name for p in bsym.outputs)

    def fresh_like(self, proxy: TensorProxy, dtype: torch.dtype, shape: list | None = None) -> TensorProxy:
        if self.context is None:
            self.context = TraceContext(reserved=self.trace.names())
        name = self.context.fresh(proxy.name)
        return TensorProxy(proxy.shape if shape is None else shape, dtype, proxy.device, name=name)


# A rule returns None (keep the line), a Proxy (the line's value is that existing value), or the
# lines that replace it (the last defines the line's own output).
Rule = Callable[[_Folder, BoundSymbol], "Proxy | list[BoundSymbol] | None"]


def _filled(folder: _Folder, bsym: BoundSymbol) -> list[BoundSymbol] | None:
    """A conversion, reshape or gather of a constant-filled tensor (`full`) is a `full` of its own
    shape and dtype; None where it is not (or where its value is returned or written back)."""
    made = folder.produced_by(bsym.args[0], Prim.FULL)
    out = bsym.output
    if made is None or folder.handed_out(out):
        return None
    value = made.args[1]
    if type(value) not in (bool, int, float) or (isinstance(value, float) and not math.isfinite(value)):
        return None
    if out.dtype != made.output.dtype:  # NOTE: converted as torch converts the filled tensor
        value = torch.tensor(value, dtype=made.output.dtype).to(out.dtype).item()
    return [made.replace(args=(list(out.shape), value, out.dtype, made.args[3]), output=out)]


# Elementwise prims whose value on constants is the same computed anywhere (exact, or one correctly
# rounded IEEE operation): folded at trace time, no value changes. Not exp, log, pow, sin, ...: a
# device's library may round those otherwise than the CPU's.
EXACT_ON_CONSTANTS = COMPARISONS | {
    Prim.NEG, Prim.ABS, Prim.ADD, Prim.SUB, Prim.MUL, Prim.DIV, Prim.WHERE, Prim.MAXIMUM, Prim.MINIMUM,
    Prim.BITWISE_AND, Prim.BITWISE_OR, Prim.BITWISE_XOR, Prim.BITWISE_NOT, Prim.SIGN, Prim.FLOOR, Prim.CEIL,
    Prim.TRUNC,
}  # fmt: skip


def _constant(folder: _Folder, bsym: BoundSymbol) -> list[BoundSymbol] | None:
    """An `EXACT_ON_CONSTANTS` prim whose tensor operands are all fills (the others numbers) is a
    `full` of its value, computed by torch on one element of each fill's dtype; None otherwise,
    where the value is not finite, or where the result is returned or written back."""
    out = bsym.output
    if bsym.sym not in EXACT_ON_CONSTANTS or folder.handed_out(out):
        return None
    operands = []
    for arg in bsym.args:
        made = folder.produced_by(arg, Prim.FULL)
        value = made.args[1] if made is not None else arg
        if type(value) not in (bool, int, float) or (isinstance(arg, Proxy) and made is None):
            return None
        operands.append(torch.tensor(value, dtype=arg.dtype) if made is not None else value)
    if not any(isinstance(o, torch.Tensor) for o in operands):
        return None
    result = evaluate(bsym.sym, tuple(operands))
    if not isinstance(result, torch.Tensor) or result.dtype != out.dtype or not bool(result.isfinite().all()):
        return None
    return [BoundSymbol(Prim.FULL, (list(out.shape), result.item(), out.dtype, out.device), {}, out)]


def _cat_of_fills(folder: _Folder, bsym: BoundSymbol) -> list[BoundSymbol] | None:
    """A cat of fills of one value is a fill (`x[:, [0, 0]]`'s index); None otherwise."""
    made = [folder.produced_by(t, Prim.FULL) for t in bsym.args[0]]
    if None in made or folder.handed_out(bsym.output):
        return None
    values = {(type(m.args[1]), repr(m.args[1])) for m in made}  # NOTE: repr: -0.0 is not 0.0
    if len(values) != 1:
        return None
    out = bsym.output
    return [made[0].replace(args=(list(out.shape), made[0].args[1], out.dtype, made[0].args[3]), output=out)]


def _convert(folder: _Folder, bsym: BoundSymbol) -> Proxy | list[BoundSymbol] | None:
    source, dtype = bsym.args
    if not isinstance(source, TensorProxy):
        return None
    if (filled := _filled(folder, bsym)) is not None:
        return filled
    root = source
    while (inner := folder.produced_by(root, Prim.CONVERT_ELEMENT_TYPE)) is not None and is_exact(
        inner.args[0].dtype, root.dtype
    ):
        root = inner.args[0]
    if root.dtype == dtype and folder.may_stand_for(bsym.output, root):
        return root
    return None if root is source else [bsym.replace(args=(root, dtype))]


def _reshape_root(folder: _Folder, value: TensorProxy) -> TensorProxy:
    while (inner := folder.produced_by(value, Prim.RESHAPE)) is not None:
        value = inner.args[0]
    return value


def _reshape(folder: _Folder, bsym: BoundSymbol) -> Proxy | list[BoundSymbol] | None:
    if (filled := _filled(folder, bsym)) is not None:
        return filled
    source, shape = bsym.args
    root = _reshape_root(folder, source)
    conversion = folder.produced_by(root, Prim.CONVERT_ELEMENT_TYPE)
    if conversion is not None and _sinks_below_reshape(folder, conversion, bsym):
        return _reshaped_then_converted(folder, conversion, bsym)
    if _same_shape(root.shape, shape) and folder.may_stand_for(bsym.output, root):
        return root
    return None if root is source else [bsym.replace(args=(root, shape))]


def _sinks_below_reshape(folder: _Folder, conversion: BoundSymbol, reshape: BoundSymbol) -> bool:
    """Whether `reshape(convert(x))` becomes `convert(reshape(x))`: where the conversion is an
    upcast there only for this reshape (`logits.float().view(-1, vocab)`, as transformers' loss
    writes it), the reshape then views `x` itself, which torch does for free outside a fusion
    (`fuse` leaves the reshapes of a region's inputs to torch), where nvFuser splits a reduction
    over a reshape into more kernels. Not a downcast (it ends a computation: its reshape is of a
    region's output, which torch makes already), nor where `x` is a view (torch could have to
    copy), where the upcast has other readers (it would be computed twice, and written twice if a
    region returned both), nor where the reshape is returned or written back."""
    source = _reshape_root(folder, conversion.args[0])
    made_by = folder.producer.get(source.name)
    return (
        conversion.output.dtype.itemsize > source.dtype.itemsize
        and folder.readers.get(conversion.output.name, 0) == 1
        and (made_by is None or made_by.sym not in VIEWS)
        and reshape.output.name not in folder.returned
        and reshape.output.name not in folder.written
    )


def _reshaped_then_converted(folder: _Folder, conversion: BoundSymbol, reshape: BoundSymbol) -> list[BoundSymbol]:
    source, shape = _reshape_root(folder, conversion.args[0]), reshape.args[1]
    lines = []
    if not _same_shape(source.shape, shape):
        moved = folder.fresh_like(reshape.output, source.dtype)
        lines.append(reshape.replace(args=(source, shape), output=moved))
        source = moved
    return [*lines, conversion.replace(args=(source, conversion.args[1]), output=reshape.output)]


def _by_column(folder: _Folder, bsym: BoundSymbol) -> list[BoundSymbol] | None:
    """`take_along_dim(a, index, dim)` where `index` is one column broadcast over every other dim
    (`a.gather(dim, idx[:, None].expand(-1, n))`) is `index_select(a, dim, column)` (the column
    reshaped to 1-D first where it has more dims); None where it is not: another dim of `index`
    varies or differs from `a`'s, or the column is itself broadcast along `dim`."""
    if bsym.sym is not Prim.TAKE_ALONG_DIM:
        return None
    a, index, dim = bsym.args
    spread = folder.produced_by(index, Prim.BROADCAST_IN_DIM)
    if spread is None:
        return None
    source, _, into = spread.args
    sizes = dict(zip(into, source.shape))
    if dim not in sizes or not same_extent(sizes[dim], index.shape[dim]):
        return None
    for d in range(index.ndim):
        if d != dim and not (same_extent(a.shape[d], index.shape[d]) and same_extent(sizes.get(d, 1), 1)):
            return None
    lines = []
    if source.ndim != 1:
        column = folder.fresh_like(source, source.dtype, shape=[index.shape[dim]])
        lines.append(BoundSymbol(Prim.RESHAPE, (source, list(column.shape)), {}, column))
        source = column
    return [*lines, BoundSymbol(Prim.INDEX_SELECT, (a, dim, source), {}, bsym.output)]


def _by_iota(folder: _Folder, bsym: BoundSymbol) -> Proxy | list[BoundSymbol] | None:
    """`index_select(a, dim, iota(n, start, step))` is the slice `start : start + n * step : step`
    of `a` along `dim` (`embedding(arange(n))`, a position table read whole), and `a` itself where
    that is all of it; None where the picks are not known to lie inside `a` at trace time, or where
    the result is returned or written back (eager returns a tensor of its own, a slice views `a`)."""
    picked = _picked_by(folder, bsym, Prim.IOTA)
    if picked is None:
        return None
    a, dim, made = picked
    out = bsym.output
    length, start, step = made.args[:3]
    size = a.shape[dim]
    # NOTE: `==` on a NumberProxy evaluates the `eq` prim, which compares the proxies again (without end)
    if type(start) is not int or type(step) is not int:
        return None
    if start == 0 and step == 1 and same_extent(length, size):
        return a  # NOTE: `out` is neither returned nor written back, so `a` may stand for it
    if (
        type(length) is not int
        or type(size) is not int
        or not (length >= 1 and start >= 0 and step >= 1 and start + step * (length - 1) < size)
    ):
        return None
    return [_slice_along(a, dim, start, start + step * (length - 1) + 1, step, out)]


def _picked_by(folder: _Folder, bsym: BoundSymbol, prim: Prim) -> tuple[TensorProxy, int, BoundSymbol] | None:
    """`(a, dim, made)` of `index_select(a, dim, index)` whose index `made` (a `prim`) produced,
    where the caller does not get the result's memory; None otherwise."""
    if bsym.sym is not Prim.INDEX_SELECT or folder.handed_out(bsym.output):
        return None
    a, dim, index = bsym.args
    made = folder.produced_by(index, prim)
    return None if made is None else (a, dim, made)


def _slice_along(a: TensorProxy, dim: int, start: int, end: int, step: int, out: TensorProxy) -> BoundSymbol:
    starts, ends, steps = [0] * a.ndim, list(a.shape), [1] * a.ndim
    starts[dim], ends[dim], steps[dim] = start, end, step
    return BoundSymbol(Prim.SLICE, (a, starts, ends, steps), {}, out)


def _by_constant(folder: _Folder, bsym: BoundSymbol) -> list[BoundSymbol] | None:
    """`index_select(a, dim, full([n], k))` is the slice `k : k + 1` of `a` along `dim`, broadcast
    to `n` there where `n > 1`; None where `k` is not known to lie inside `a` at trace time (eager
    raises), or where the result is returned or written back (eager returns rows of its own)."""
    picked = _picked_by(folder, bsym, Prim.FULL)
    if picked is None:
        return None
    a, dim, made = picked
    out = bsym.output
    k, size = made.args[1], a.shape[dim]
    if type(k) is not int or type(size) is not int or not 0 <= k < size:
        return None
    if is_unit(out.shape[dim]):
        return [_slice_along(a, dim, k, k + 1, 1, out)]
    row = folder.fresh_like(out, out.dtype, shape=[1 if d == dim else s for d, s in enumerate(out.shape)])
    broadcast = BoundSymbol(Prim.BROADCAST_IN_DIM, (row, list(out.shape), list(range(out.ndim))), {}, out)
    return [_slice_along(a, dim, k, k + 1, 1, row), broadcast]


def _gather(folder: _Folder, bsym: BoundSymbol) -> Proxy | list[BoundSymbol] | None:
    if (filled := _filled(folder, bsym)) is not None:
        return filled
    if (picked := _by_constant(folder, bsym)) is not None:
        return picked
    if (selected := _by_column(folder, bsym)) is not None:
        # NOTE: a column that is an iota is selected by directly (no reshape line before it): a slice
        sliced = _by_iota(folder, selected[-1])
        return selected if sliced is None else sliced
    if (sliced := _by_iota(folder, bsym)) is not None:
        return sliced
    conversion = folder.produced_by(bsym.args[0], Prim.CONVERT_ELEMENT_TYPE)
    if conversion is None:
        return None
    source = conversion.args[0]
    picked = folder.fresh_like(bsym.output, source.dtype)
    gather = bsym.replace(args=(source, *bsym.args[1:]), output=picked)
    return [gather, conversion.replace(args=(picked, bsym.output.dtype), output=bsym.output)]


def _slice_between_permutes(folder: _Folder, source: Any, q: list, out: TensorProxy) -> list[BoundSymbol] | None:
    """The lines computing `out = permute(source, q)` where `source = slice(permute(x, p), ...)`:
    the slice of `x` itself, permuted by `p` and `q` composed where they do not cancel; None where
    `source` is not such a slice."""
    sliced = folder.produced_by(source, Prim.SLICE)
    inner = folder.produced_by(sliced.args[0], Prim.PERMUTE) if sliced is not None else None
    if inner is None:
        return None
    x, p = inner.args
    bounds = [[0] * x.ndim, [0] * x.ndim, [1] * x.ndim]
    for d, dim in enumerate(p):
        for bound, values in zip(bounds, sliced.args[1:]):
            bound[dim] = values[d]
    order = [p[i] for i in q]
    if order == list(range(x.ndim)):
        return [BoundSymbol(Prim.SLICE, (x, *bounds), {}, out)]
    piece = folder.fresh_like(out, x.dtype, shape=[sliced.output.shape[list(p).index(j)] for j in range(x.ndim)])
    return [BoundSymbol(Prim.SLICE, (x, *bounds), {}, piece), BoundSymbol(Prim.PERMUTE, (piece, order), {}, out)]


def _permute(folder: _Folder, bsym: BoundSymbol) -> list[BoundSymbol] | None:
    """`permute(slice(permute(x, p), ...), q)` is the slice of `x` itself, permuted once by the two
    permutations composed, or not at all where they cancel; so is it with a broadcast that keeps
    the rank between slice and `q` (broadcast after). Advanced indexing moves the indexed dim to
    the front and back (`qkv[..., [-2], :]`, a slice once its index folds; `[k, k]` broadcasts):
    folded, the pick is one view of `x`, and a fusion definition one slice of its input."""
    source, q = bsym.args
    out = bsym.output
    if (lines := _slice_between_permutes(folder, source, q, out)) is not None:
        return lines
    spread = folder.produced_by(source, Prim.BROADCAST_IN_DIM)
    if spread is None or list(spread.args[2]) != list(range(out.ndim)):
        return None
    row = spread.args[0]
    piece = folder.fresh_like(out, out.dtype, shape=[row.shape[i] for i in q])
    lines = _slice_between_permutes(folder, row, q, piece)
    if lines is None:
        return None
    return [*lines, BoundSymbol(Prim.BROADCAST_IN_DIM, (piece, list(out.shape), list(range(out.ndim))), {}, out)]


def _device_put(folder: _Folder, bsym: BoundSymbol) -> list[BoundSymbol] | None:
    """A constant made on one device and copied to another is made there: no copy each call."""
    made = folder.produced_by(bsym.args[0], Prim.FULL) or folder.produced_by(bsym.args[0], Prim.IOTA)
    if made is None:
        return None
    return [made.replace(args=(*made.args[:-1], bsym.args[1]), output=bsym.output)]


def _identity(folder: _Folder, bsym: BoundSymbol) -> Proxy | None:
    """`x * 1`, `1 * x`, `x / 1`: `x`, where it has the result's dtype (prims do not promote or
    broadcast: its shape is the result's)."""
    a, b = bsym.args
    operands = ((a, b), (b, a)) if bsym.sym is Prim.MUL else ((a, b),)
    for value, other in operands:
        if (
            isinstance(value, TensorProxy)
            and type(other) in (int, float)
            and other == 1
            and value.dtype == bsym.output.dtype
            and folder.may_stand_for(bsym.output, value)
        ):
            return value
    return None


def _elementwise(folder: _Folder, bsym: BoundSymbol) -> Proxy | list[BoundSymbol] | None:
    constant = _constant(folder, bsym)
    return constant if constant is not None or bsym.sym not in (Prim.MUL, Prim.DIV) else _identity(folder, bsym)


RULES: dict[Prim, Rule] = {
    **{prim: _elementwise for prim in EXACT_ON_CONSTANTS},
    Prim.CAT: _cat_of_fills,
    Prim.CONVERT_ELEMENT_TYPE: _convert,
    Prim.DEVICE_PUT: _device_put,
    Prim.PERMUTE: _permute,
    Prim.RESHAPE: _reshape,
    **{prim: _gather for prim in GATHERS},
}


@trace_pass("fold_conversions")
def fold_conversions(trace: Trace) -> Trace:
    """The trace with exact conversion and reshape chains and multiplications by 1 folded, and
    conversions moved after the gathers that read them; lines left dead by that are dropped."""
    folder = _Folder(trace)
    replacement: dict[str, Proxy] = {}

    def substitute(value: Any) -> Any:
        return map_proxies(value, lambda p: replacement.get(p.name, p))

    bsyms: list[BoundSymbol] = []
    changed = False
    for bsym in trace.bsyms:
        if replacement and any(p.name in replacement for p in bsym.inputs):
            bsym = bsym.replace(args=substitute(bsym.args), kwargs=substitute(bsym.kwargs))
        rule = RULES.get(bsym.sym)
        result = rule(folder, bsym) if rule is not None else None
        if isinstance(result, Proxy):
            replacement[bsym.output.name] = result
            if bsym.output.name in folder.returned:  # two outputs must not both become it
                folder.returned.add(result.name)
            changed = True
            continue
        changed |= result is not None
        for line in result or [bsym]:
            bsyms.append(line)
            folder.record(line)
    folded = trace.with_bsyms(bsyms, output=substitute(trace.output))
    return dce(folded) if changed else folded
