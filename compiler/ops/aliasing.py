"""Aliasing while tracing: what each tensor is a view of, and eager's memory layout where it matters.

The IR's aliasing rule (`prims.VIEWS`): the output of a view prim (slice, reshape, permute,
squeeze, broadcast_in_dim, stop_gradient) aliases its first argument; every other prim returns a fresh tensor.
`passes/functionalize.py` relies on nothing else. Eager PyTorch agrees for every view op except
`reshape` (and `flatten`, `reshape_as`), which returns a view when the input's strides allow it
and a copy otherwise. This module keeps the IR true to eager while tracing:

- `reshape_operand` runs before each reshape prim is recorded (it is installed in
  `prims.TRACING_REWRITES`); where eager would copy, it records a copy first, so that the IR's
  reshape views a fresh tensor (`contiguous_operand` does the same for `Tensor.contiguous`). It
  decides with `layout`, a model of eager's strides: computation inputs have the strides of the
  example tensors (the frontend guards them with `check_strides` when the trace writes into
  anything), view prims transform strides, elementwise prims lay
  their output out as TensorIterator does, other prims give contiguous outputs, and anything
  else (an attention output) is unknown; under symbolic sizes only row-major is known
  (compiler/ops/eager_strides.py).
- where the layout is unknown, the reshape is recorded as a view and its input remembered as
  ambiguous; `check_writable` then rejects in-place writes into that tensor's family.
- `check_writable` also rejects writes through expanded (broadcast) views, which have no inverse.

State lives per `TraceContext` (keyed weakly), next to the context's `producers` index.
"""

from __future__ import annotations

import contextlib
import contextvars
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

from compiler import prims
from compiler.core import ir
from compiler.core.errors import called_at, check
from compiler.core.ir import BoundSymbol, TensorProxy, TraceContext, size_product
from compiler.ops import row_major
from compiler.ops.eager_strides import (
    ROW_MAJOR,
    Layout,
    Strides,
    concrete,
    contiguous_strides,
    expands,
    iterator_strides,
    layout_of,
    view_strides,
)
from compiler.prims import Prim


@dataclass
class _State:
    input_strides: dict[int, Strides] = field(default_factory=dict)
    layouts: dict[int, Layout] = field(default_factory=dict)
    relied_on: dict[int, TensorProxy] = field(default_factory=dict)
    ambiguous: list[TensorProxy] = field(default_factory=list)
    unwritable: list[tuple[TensorProxy, str]] = field(default_factory=list)
    strides_read: bool = False


_STATES: weakref.WeakKeyDictionary[TraceContext, _State] = weakref.WeakKeyDictionary()


def _state(context: TraceContext) -> _State:
    state = _STATES.get(context)
    if state is None:
        state = _STATES[context] = _State()
    return state


def register_input(context: TraceContext, proxy: TensorProxy, tensor: torch.Tensor) -> None:
    """Records the strides of the example tensor a computation input stands for."""
    _state(context).input_strides[id(proxy)] = tuple(tensor.stride())


def read_strides(t: TensorProxy) -> Layout:
    """eager's strides of `t` for a program that reads them (is_contiguous, stride): the inputs
    they derive from are then guarded whatever the program writes (`strides_were_read`).
    `ROW_MAJOR` for a row-major tensor of symbolic sizes (compiler/ops/eager_strides.py)."""
    context = ir.current()
    if context is None:
        return None
    _state(context).strides_read = True
    return layout(context, t)


def set_memory_format(t: TensorProxy, source: TensorProxy, memory_format: object) -> None:
    """Records eager's layout for `t`, a new tensor made from `source` with `memory_format`
    (None or preserve_format: `source`'s dense order; channels-last orders; otherwise row-major)."""
    context = ir.current()
    if context is None:
        return
    state = _state(context)
    layouts: Layout = None
    if not concrete(t.shape):  # NOTE: only a row-major layout is known whatever the sizes
        same = memory_format in (None, torch.preserve_format) and layout(context, source) is ROW_MAJOR
        if same or memory_format is torch.contiguous_format:
            layouts = ROW_MAJOR
            row_major.mark(context, t)
    else:
        ndim = len(t.shape)
        if memory_format in (None, torch.preserve_format):
            src = layout(context, source) if concrete(source.shape) else None
            layouts = None if src is None else iterator_strides(t.shape, [src])
        elif memory_format is torch.contiguous_format:
            layouts = contiguous_strides(t.shape)
            row_major.mark(context, t)
        elif (memory_format, ndim) in ((torch.channels_last, 4), (torch.channels_last_3d, 5)):
            order = [0, *range(2, ndim), 1]  # slowest first
            strides, step = [0] * ndim, 1
            for d in reversed(order):
                strides[d] = step
                step *= max(t.shape[d], 1)
            layouts = tuple(strides)
    state.layouts[id(t)] = layouts


def strides_were_read(context: TraceContext) -> bool:
    """Whether the program asked for a layout (its inputs' strides must then be guarded)."""
    return _state(context).strides_read


def relied_on_inputs(context: TraceContext) -> list[tuple[TensorProxy, Strides]]:
    """The inputs whose strides a reshape decision depended on, with those strides."""
    state = _state(context)
    return [(p, state.input_strides[id(p)]) for p in state.relied_on.values()]


def view_link(context: TraceContext, t: TensorProxy) -> BoundSymbol | None:
    """The view prim that made `t` (a view of its first argument), or None for a fresh tensor."""
    bsym = context.producers.get(id(t))
    return bsym if bsym is not None and bsym.sym in prims.VIEWS else None


def root(context: TraceContext, t: TensorProxy) -> TensorProxy:
    """The fresh tensor (input or computed) whose memory `t` views."""
    link = view_link(context, t)
    while link is not None:
        t = link.args[0]
        link = view_link(context, t)
    return t


def layout(context: TraceContext, t: TensorProxy) -> Layout:
    """eager's strides for `t` as far as the model knows them (`ROW_MAJOR`: row-major, of symbolic
    sizes; None: unknown)."""
    state = _state(context)
    stack = [t]
    while stack:
        p = stack[-1]
        if id(p) in state.layouts:
            stack.pop()
            continue
        if id(p) in state.input_strides:
            # NOTE: an input of symbolic sizes has strides that change with them: unknown, never guarded
            known = concrete(p.shape)
            if known:
                state.relied_on[id(p)] = p
            state.layouts[id(p)] = state.input_strides[id(p)] if known else None
            stack.pop()
            continue
        bsym = context.producers.get(id(p))
        operands = [a for a in bsym.args if isinstance(a, TensorProxy)] if bsym is not None else []
        pending = [a for a in operands if id(a) not in state.layouts]
        if pending:
            stack.extend(pending)
            continue
        stack.pop()
        known = [(a, state.layouts[id(a)]) for a in operands]
        state.layouts[id(p)] = None if bsym is None else layout_of(bsym, p, known)
    return state.layouts[id(t)]


# ---------------------------------------------------------------------------------------------
# hooks for the tracer


def fresh_copy(t: TensorProxy) -> TensorProxy:
    """Records a prim that copies `t` into a new tensor (there is no copy prim: x * 1 is one)."""
    return prims.bitwise_and(t, True) if t.dtype == torch.bool else prims.mul(t, 1)


# How the reshapes recorded now behave in eager: None (as `reshape`: a view or a copy by the
# strides), "view" (as `Tensor.view`: always a view; eager raises where strides forbid one),
# "read" (an op's own reshape whose result is only read, never written through: view or copy
# cannot be told apart) or "element_view" (part of an op that eager makes a view whatever the
# strides, such as `diagonal`: the IR's reshape views elements in logical order, which is what a
# write through that op must reach).
_RESHAPE_KIND: contextvars.ContextVar[str | None] = contextvars.ContextVar("reshape_kind", default=None)


@contextlib.contextmanager
def reshapes_as(kind: str) -> Iterator[None]:
    """Reshapes recorded inside are never ambiguous: eager views ("view"), only read ("read") or
    parts of an op that views ("element_view"); see `_RESHAPE_KIND`."""
    token = _RESHAPE_KIND.set(kind)
    try:
        yield
    finally:
        _RESHAPE_KIND.reset(token)


def reshape_operand(a: TensorProxy, shape: list | tuple) -> TensorProxy:
    """What a reshape prim about to be recorded should view: `a`, or a copy of it where eager's
    reshape would copy. Remembers `a` as ambiguous when its layout is unknown (unless the reshape
    is known to view, or only to be read: `reshapes_as`)."""
    context = ir.current()
    if context is None or not isinstance(a, TensorProxy):
        return a
    state = _state(context)
    kind = _RESHAPE_KIND.get()
    if kind == "element_view":
        return a
    src = layout(context, a)
    if src is ROW_MAJOR:  # NOTE: a row-major tensor reshapes as a view, whatever its sizes
        return a
    if not (concrete(a.shape) and concrete(shape)):
        src = None
    if src is None:
        if kind is None:
            state.ambiguous.append(a)
        return a
    if view_strides(a.shape, src, shape) is not None:
        return a
    check(
        kind != "view",
        lambda: (
            f"view size is not compatible with input tensor's size and stride (at least one dimension spans "
            f"across two contiguous subspaces): {a.name} of shape {tuple(a.shape)} and strides {src} viewed as "
            f"{tuple(shape)}. Use .reshape(...) instead{called_at()}"
        ),
        RuntimeError,
    )
    copy = fresh_copy(a)
    state.layouts[id(copy)] = contiguous_strides(a.shape)
    return copy


def contiguous_operand(t: TensorProxy) -> TensorProxy:
    """What `t.contiguous()` returns: `t` where eager returns it, a copy where eager copies."""
    context = ir.current()
    if context is None:
        return t
    src, expected = layout(context, t), contiguous_strides(t.shape)
    if src is ROW_MAJOR:
        return t
    if src is None or expected is None:
        _state(context).ambiguous.append(t)
        return t
    if all(stride == want for size, stride, want in zip(t.shape, src, expected) if size != 1):
        return t
    copy = fresh_copy(t)
    _state(context).layouts[id(copy)] = expected
    row_major.mark(context, copy)
    return copy


def forbid_writes(t: TensorProxy, why: str) -> None:
    """Makes writes into `t` (or any view of it) raise: `t` is a new tensor where eager's op returns
    a view, so a write would not reach what eager's would (`why` names the op)."""
    context = ir.current()
    if context is not None:
        _state(context).unwritable.append((t, why))


def check_writable(target: TensorProxy, what: str) -> None:
    """Raises unless an in-place write into `target` can be functionalized exactly as eager runs it.

    `what` names the operation for the message, which also names the user's line of code.
    """
    context = ir.current()
    check(context is not None, lambda: f"{what} was called on proxies outside of tracing", RuntimeError)
    node, link = target, view_link(context, target)
    while link is not None:
        if link.sym is Prim.BROADCAST_IN_DIM and expands(link):
            _reject_expanded_write(context, target, node, link, what)
        node, link = link.args[0], view_link(context, link.args[0])
    for t, why in _state(context).unwritable:
        check(
            root(context, t) is not node,
            lambda t=t, why=why: (
                f"{what} writes into {target.name}, which shares memory with {t.name}, made by {why}: writing "
                f"through it is not supported; clone() it first{called_at()}"
            ),
            NotImplementedError,
        )
    for a in _state(context).ambiguous:
        check(
            root(context, a) is not node,
            lambda a=a: (
                f"{what} writes into {target.name}, which shares memory with {a.name}; {a.name} was reshaped "
                f"and its memory layout is not known while tracing (an attention output or symbolic sizes), so "
                f"whether eager's reshape made a view or a copy is unknown; clone() before the reshape"
                f"{called_at()}"
            ),
            NotImplementedError,
        )


def _reject_expanded_write(
    context: TraceContext, target: TensorProxy, node: TensorProxy, link: BoundSymbol, what: str
) -> None:
    """Raises for a write into `target`, (a view of) the expanded view `node`: eager's own error
    where `target` has elements sharing memory (fill_ and zero_ excepted, which eager allows),
    else NotImplementedError (the write is defined in eager, but the IR cannot invert an expand)."""
    with torch._C.DisableTorchFunction():
        elements = _elements(context, target)
        overlaps = elements is None or elements.unique().numel() < elements.numel()
    fills = what.endswith(("fill_", "zero_"))
    check(
        not overlaps or fills,
        lambda: (
            f"{what}: unsupported operation: more than one element of the written-to tensor {target.name} refers "
            f"to a single memory location (it is an expanded view of {link.args[0].name}). Please clone() the "
            f"tensor before performing the operation{called_at()}"
        ),
        RuntimeError,
    )
    raise NotImplementedError(
        f"{what} writes into {target.name}, which is (a view of) {node.name}, an expanded (broadcast) view "
        f"of {link.args[0].name}: writing through an expand is not supported; write into "
        f"{link.args[0].name} or clone() the expanded tensor first{called_at()}"
    )


def _elements(context: TraceContext, t: TensorProxy) -> torch.Tensor | None:
    """For each element of `t`, the position of the element of its root it views (replaying the
    view prims on the root's positions), or None where a size is symbolic."""
    chain = []
    link = view_link(context, t)
    while link is not None:
        chain.append(link)
        link = view_link(context, link.args[0])
    base = chain[-1].args[0] if chain else t
    if not concrete(base.shape):
        return None
    value = torch.arange(size_product(base.shape)).reshape(base.shape)
    for bsym in reversed(chain):
        if any(isinstance(a, ir.NumberProxy) for a in ir.proxies_in(bsym.args[1:])):
            return None
        value = prims.evaluate(bsym.sym, (value, *bsym.args[1:]))
    return value


def check_no_overlap(target: TensorProxy, operands: tuple, what: str) -> None:
    """Raises eager's error when an operand of an in-place op shares memory with its target other
    than element for element (eager then rejects the op, or its result depends on the order it
    visits elements)."""
    context = ir.current()
    if context is None or not isinstance(target, TensorProxy):
        return
    check_writable(target, what)  # NOTE: eager reports the target's own overlap first
    # NOTE: the replay runs real torch functions, which the tracing mode would route to the ops.
    with torch._C.DisableTorchFunction():
        _check_no_overlap(context, target, operands, what)


def _check_no_overlap(context: TraceContext, target: TensorProxy, operands: tuple, what: str) -> None:
    target_root = root(context, target)
    for operand in operands:
        if not isinstance(operand, TensorProxy) or root(context, operand) is not target_root:
            continue
        written, read = _elements(context, target), _elements(context, operand)
        if written is None or read is None:
            continue
        same = written.shape == read.shape and torch.equal(written, read)
        check(
            same or not bool(torch.isin(read, written).any()),
            lambda operand=operand: (
                f"{what}: unsupported operation: some elements of the input tensor {operand.name} and the "
                f"written-to tensor {target.name} refer to a single memory location. Please clone() the tensor "
                f"before performing the operation (eager raises this where it detects the overlap; elsewhere its "
                f"result depends on the order it visits elements){called_at()}"
            ),
            RuntimeError,
        )


# NOTE: eager reshape copies when strides forbid a view; the IR's reshape always views.
prims.TRACING_REWRITES[Prim.RESHAPE] = lambda a, shape: (reshape_operand(a, shape), shape)
