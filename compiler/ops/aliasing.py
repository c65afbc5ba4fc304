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
  else (an attention output, symbolic sizes) is unknown.
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
from compiler.prims import Prim

Strides = tuple[int, ...]
# Prims whose output takes its layout from its tensor operands the way TensorIterator does
# (elementwise ops; clone-like ops follow their first operand); other outputs are contiguous,
# except attention's, which depends on the device's kernel.
_ITERATOR_LAYOUT = prims.ELEMENTWISE
_FIRST_OPERAND_LAYOUT = frozenset({Prim.INDEX_COPY, Prim.INDEX_ADD, Prim.SLICE_UPDATE})
_UNKNOWN_LAYOUT = frozenset({Prim.SDPA, Prim.SDPA_FORWARD, Prim.SDPA_BACKWARD})


@dataclass
class _State:
    input_strides: dict[int, Strides] = field(default_factory=dict)
    layouts: dict[int, Strides | None] = field(default_factory=dict)
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


def read_strides(t: TensorProxy) -> Strides | None:
    """eager's strides of `t` for a program that reads them (is_contiguous, stride): the inputs
    they derive from are then guarded whatever the program writes (`strides_were_read`)."""
    context = ir.current()
    if context is None:
        return None
    _state(context).strides_read = True
    return layout(context, t) if _concrete(t.shape) else None


def set_memory_format(t: TensorProxy, source: TensorProxy, memory_format: object) -> None:
    """Records eager's layout for `t`, a new tensor made from `source` with `memory_format`
    (None or preserve_format: `source`'s dense order; channels-last orders; otherwise row-major)."""
    context = ir.current()
    if context is None:
        return
    state = _state(context)
    layouts: Strides | None = None
    if _concrete(t.shape):
        ndim = len(t.shape)
        if memory_format in (None, torch.preserve_format):
            src = layout(context, source) if _concrete(source.shape) else None
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


# ---------------------------------------------------------------------------------------------
# eager's strides


def _concrete(shape: tuple | list) -> bool:
    return all(type(s) is int for s in shape)


def contiguous_strides(shape: tuple | list) -> Strides | None:
    """Row-major strides of `shape` (None when a size is symbolic)."""
    if not _concrete(shape):
        return None
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def view_strides(shape: tuple | list, strides: Strides, new_shape: tuple | list) -> Strides | None:
    """Strides of `new_shape` viewing a tensor of `shape`/`strides`, or None when no view exists
    (ATen's computeStride; sizes must be concrete)."""
    if not shape:
        return tuple(1 for _ in new_shape)
    if 0 in shape:
        return contiguous_strides(new_shape)
    new_strides = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base_stride = strides[-1]
    tensor_numel, view_numel = 1, 1
    for tensor_d in range(len(shape) - 1, -1, -1):
        tensor_numel *= shape[tensor_d]
        if tensor_d == 0 or (shape[tensor_d - 1] != 1 and strides[tensor_d - 1] != tensor_numel * chunk_base_stride):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_strides[view_d] = view_numel * chunk_base_stride
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride = strides[tensor_d - 1]
                tensor_numel, view_numel = 1, 1
    return tuple(new_strides) if view_d == -1 else None


def iterator_strides(shape: tuple | list, operands: list[Strides]) -> Strides | None:
    """The strides TensorIterator gives the output of an elementwise op on operands of `shape`
    with these strides (ATen's `reorder_dimensions`: dims ordered by the operands' strides, the
    first operand that tells two dims apart decides, broadcast dims never do)."""
    if not _concrete(shape):
        return None
    ndim = len(shape)

    def should_swap(d0: int, d1: int) -> int:
        for strides in operands:
            s0, s1 = strides[d0], strides[d1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 != s1:
                return 1 if s0 > s1 else -1
            if shape[d0] > shape[d1]:
                return 1
        return 0

    perm = list(range(ndim - 1, -1, -1))  # fastest dim first
    for i in range(1, ndim):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            comparison = should_swap(perm[d0], perm[d1])
            if comparison > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif comparison < 0:
                break
    strides, step = [0] * ndim, 1
    for d in perm:
        strides[d] = step
        step *= max(shape[d], 1)
    return tuple(strides)


def expands(link: BoundSymbol) -> bool:
    """Whether a broadcast_in_dim link repeats elements (a real expand, not an unsqueeze)."""
    a, shape, broadcast_dims = link.args
    kept = dict(zip(broadcast_dims, a.shape))
    for d, size in enumerate(shape):
        if type(size) is int and size == 1:
            continue
        source = kept.get(d)
        if source is None or (type(source) is int and source == 1):
            return True
    return False


def _view_layout(link: BoundSymbol, src: Strides) -> Strides | None:
    prim, a = link.sym, link.args[0]
    if prim is Prim.STOP_GRADIENT:
        return src
    if prim is Prim.SLICE:
        return tuple(s * step for s, step in zip(src, link.args[3]))
    if prim is Prim.PERMUTE:
        return tuple(src[i] for i in link.args[1])
    if prim is Prim.SQUEEZE:
        return tuple(s for i, s in enumerate(src) if i not in link.args[1])
    if prim is Prim.BROADCAST_IN_DIM:
        shape, broadcast_dims = link.args[1], link.args[2]
        strides = [0] * len(shape)
        for i, d in enumerate(broadcast_dims):
            repeated = type(a.shape[i]) is int and a.shape[i] == 1 and not (type(shape[d]) is int and shape[d] == 1)
            strides[d] = 0 if repeated else src[i]
        return tuple(strides)
    if not (_concrete(a.shape) and _concrete(link.args[1])):
        return None
    return view_strides(a.shape, src, link.args[1]) or contiguous_strides(link.args[1])


def _layout_of(
    bsym: BoundSymbol, out: TensorProxy, operands: list[tuple[TensorProxy, Strides | None]]
) -> Strides | None:
    """eager's strides for `out`, one of the outputs of `bsym`, given its operands' strides."""
    if bsym.sym in prims.VIEWS:
        src = operands[0][1]
        return None if src is None else _view_layout(bsym, src)
    if bsym.sym in _UNKNOWN_LAYOUT:
        return None
    if bsym.sym is Prim.CONVOLUTION:  # contiguous from a contiguous input; cuDNN picks for others
        source, strides = operands[0]
        return contiguous_strides(out.shape) if strides == contiguous_strides(source.shape) else None
    if bsym.sym in _ITERATOR_LAYOUT or bsym.sym in _FIRST_OPERAND_LAYOUT:
        followed = operands[:1] if bsym.sym in _FIRST_OPERAND_LAYOUT else operands
        if any(s is None for _, s in followed):
            return None
        return iterator_strides(out.shape, [s for _, s in followed])
    return contiguous_strides(out.shape)


def layout(context: TraceContext, t: TensorProxy) -> Strides | None:
    """eager's strides for `t` as far as the model knows them (None: unknown)."""
    state = _state(context)
    stack = [t]
    while stack:
        p = stack[-1]
        if id(p) in state.layouts:
            stack.pop()
            continue
        if id(p) in state.input_strides:
            state.relied_on[id(p)] = p
            state.layouts[id(p)] = state.input_strides[id(p)]
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
        state.layouts[id(p)] = None if bsym is None else _layout_of(bsym, p, known)
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
    src = layout(context, a) if _concrete(a.shape) and _concrete(shape) else None
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
    if not _concrete(base.shape):
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
