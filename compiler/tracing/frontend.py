"""Tracing: calls the user's function on proxies and returns a prologue and a computation trace.

Arguments become proxies: tensors become `TensorProxy` inputs; int/float/bool become
`NumberProxy` inputs under `Numbers.SYMBOLIC` and baked-in constants under `Numbers.CONSTANT`
(`jit(numbers=...)`); tuples, lists and dicts are unpacked; objects (a Hugging Face cache) are
unpacked by their attributes, and what the call does to them, or to a list or dict it was given,
is written back after it (objects.py, `trace_call`); other values (None, strings, dtypes,
classes) are baked in. A tensor the program reads from a module attribute, a closure or a global
is an input too (captured_tensors.py). The prologue trace unpacks `(args, kwargs)` and guards everything the computation
assumed: each tensor's shape, dtype and device, each number's type (symbolic) or value (constant),
each baked-in value, and every condition a branch took on a NumberProxy (recorded as `check_value`
while tracing, moved to the prologue together with the number arithmetic it depends on). Under
`Numbers.CONSTANT`, the numbers named in `dynamic` (input names; automatic dynamic,
compiler/runtime/auto_dynamic.py) are symbolic all the same. Under either, a tensor size named in
`dynamic` ('x.size(1)', see `size_name`) is symbolic when it is at least 2: an int input read
by the prologue with `size`, `check_tensor` holding None for it (any size of at least 2).

In-place ops are recorded as they happen (`prims.copy_`, see ops/inplace.py); the
functionalization pass makes the computation pure. When the function writes into an argument
that is the very same view of memory as another (the same tensor passed twice), it is traced
again with those arguments merged into ONE computation input, so a write through one is seen
through the other. The prologue's `check_aliasing` guard then makes sure a call shares memory
between arguments exactly as the traced call did: merged arguments stay one tensor, and, when
the trace writes into an argument, the others do not overlap it (arguments overlapping in other
ways are rejected while tracing). One computation input has one requires_grad: a merged argument
that is another tensor than the first over the same memory (a tensor and its `.data`) is refused
where either requires grad, and guarded not to. `check_strides` guards the input layouts that reshape's
aliasing was decided on (compiler/ops/aliasing.py). Pure functions get none of these guards.
With `exact_strides` (a CUDA-graphed entry) every tensor argument's strides are guarded too.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from compiler import ops  # noqa: F401  (registers the ops and installs proxies.HOOKS.dispatch)
from compiler.core.errors import TracingError, check, explaining_unbound_methods
from compiler.core.ir import (
    BoundSymbol,
    NumberProxy,
    Proxy,
    Symbol,
    TensorProxy,
    Trace,
    TraceContext,
    proxies_in,
    tracing,
)
from compiler.core.memory import overlapping
from compiler.ops import aliasing, autocast, row_major
from compiler.prims import GUARDS, INPLACE, Prim
from compiler.tracing import captured_tensors, complex_values, free_values, objects
from compiler.tracing.dense_strides import dense_strides
from compiler.tracing.numbers import Numbers
from compiler.tracing.patches import (
    BYPASSES,
    TracingMode,
    _TracingMode,  # noqa: F401  (tests enter the mode by this name)
    compiling,
    program_running,
)

_NUMBERS = (int, float, bool)
_BAKED_TYPES = (type(None), str, torch.dtype, torch.device, type(Ellipsis), type)


class _Inputs:
    """Builds the input proxies and the prologue's unpacking and guard bound symbols."""

    def __init__(
        self, context: TraceContext, symbolic: bool, merge_same: bool, dynamic: frozenset[str], exact_strides: bool
    ) -> None:
        self.context = context
        self.symbolic = symbolic
        self.dynamic = dynamic
        self.merge_same = merge_same
        self.exact_strides = exact_strides
        # id of a tensor input with symbolic sizes -> its strides written in them (dense_strides.py)
        self.strides: dict[int, tuple] = {}
        self.prologue: list[BoundSymbol] = []
        self.computation_inputs: list[Proxy] = []
        # every tensor argument: (prologue proxy, example tensor, index of the argument it was
        # merged with: the first that is the very same view of memory, or its own index)
        self.tensors: list[tuple[TensorProxy, torch.Tensor, int]] = []
        self.views: dict[tuple, int] = {}  # _view_key(tensor) -> index of the first tensor with it
        self.passed_twice = False  # whether some tensor argument is the same view as another
        self.stand_ins = objects.StandIns()  # the objects, lists and dicts given (objects.py)
        self.places = objects.Places()  # where each of them is reached

    def _guard(self, prim: Prim, *args: Any) -> None:
        self.prologue.append(BoundSymbol(prim, args, {}, None))

    def element(self, value: Any, name: str) -> tuple[Proxy, Any]:
        """(the prologue's proxy for `value`, what the traced function receives instead of it)."""
        proxy_name = self.context.claim(name)
        if isinstance(value, torch.Tensor):
            shape = self.shape(value, proxy_name)
            proxy = TensorProxy(shape, value.dtype, value.device, name=proxy_name)
            spec = tuple(None if isinstance(s, NumberProxy) else s for s in shape)
            self._guard(Prim.CHECK_TENSOR, proxy, spec, value.dtype, value.device)
            if value.dtype.is_complex:  # NOTE: traces hold real tensors only (tracing/complex_values.py)
                return proxy, complex_values.argument(self, proxy, value)
            return proxy, self.tensor(proxy, value)
        if type(value) in _NUMBERS:
            proxy = NumberProxy(type(value), value, name=proxy_name)
            if self.symbolic or proxy_name in self.dynamic:
                self._guard(Prim.CHECK_TYPE, proxy, type(value))
                self.computation_inputs.append(proxy)
                return proxy, proxy
            self._guard(Prim.CHECK_VALUE, proxy, value)
            return proxy, value
        if type(value) is tuple:
            proxy = Proxy(proxy_name)
            self._guard(Prim.CHECK_TYPE, proxy, tuple)
            return proxy, tuple(self.sequence(proxy, value, proxy_name))
        if isinstance(value, _BAKED_TYPES):
            proxy = Proxy(proxy_name)
            self._guard(Prim.CHECK_VALUE, proxy, value)
            return proxy, value
        if type(value) in (list, dict) or objects.is_object_argument(value):
            proxy = Proxy(proxy_name)
            shared, seen = self.places.again(value, proxy, name)
            if shared:  # NOTE: unpacked where it was first reached; the guard on `first_places` checks it
                return proxy, seen
            return proxy, self.places.unpacked(value, proxy, self.unpack(value, proxy, proxy_name))
        raise TypeError(
            f"argument {name} of type {type(value).__name__} is not supported: jitted functions take "
            "tensors, int/float/bool, None, strings, dtypes, devices, classes, tuples/lists/dicts of those, "
            "and objects whose attributes are those"
        )

    def tensor(self, proxy: TensorProxy, value: torch.Tensor) -> TensorProxy:
        """What the function receives for tensor argument `value` guarded as `proxy` (see `element`)."""
        same = self.views.setdefault(_view_key(value), len(self.tensors))
        self.passed_twice |= same < len(self.tensors)
        self.tensors.append((proxy, value, same if self.merge_same else len(self.tensors)))
        if self.merge_same and same < len(self.tensors) - 1:
            self._merged_without_grad(proxy, value, same)
            return self.tensors[same][0]
        aliasing.register_input(self.context, proxy, value)
        self.computation_inputs.append(proxy)
        for dim, s in enumerate(proxy.shape):
            if isinstance(s, NumberProxy):
                self.prologue.append(BoundSymbol(Prim.SIZE, (proxy, dim), {}, s))
                self.computation_inputs.append(s)
        if self.exact_strides and any(isinstance(s, NumberProxy) for s in proxy.shape):
            self.strides[id(proxy)] = dense_strides(proxy.shape, value.stride(), value.shape, self._multiply)
        return proxy

    def _merged_without_grad(self, proxy: TensorProxy, value: torch.Tensor, same: int) -> None:
        """Checks, and guards, that tensor argument `proxy`, merged with argument number `same`
        (the same view of memory), takes no part in autograd of its own.

        NOTE: the merged arguments are one computation input, whose requires_grad is the first's:
        two different tensors over the same memory (a tensor and its `.data`, as a dynamo graph
        split there passes them) may differ in autograd, which one input cannot hold."""
        first_proxy, first = self.tensors[same][0], self.tensors[same][1]
        grad = torch.is_grad_enabled() and (value.requires_grad or (first.requires_grad and value is not first))
        check(
            not grad,
            lambda: (
                f"arguments {first_proxy.name} and {proxy.name} are the same memory and the function writes into "
                "one, while one of them requires grad ("
                + ("the same tensor passed twice" if value is first else "a tensor and its .data or a detached alias")
                + "): not supported (pass the tensor once)"
            ),
            NotImplementedError,
        )
        self._guard(Prim.CHECK_REQUIRES_GRAD, (proxy,), (False,))

    def unpack(self, value: list | dict | Any, proxy: Proxy, name: str) -> Any:
        """Unpacks a list, a dict or an object by its attributes (tracing/objects.py) at its first
        place; returns what the traced function sees: a new list or dict, or a stand-in."""
        self._guard(Prim.CHECK_TYPE, proxy, type(value))
        if type(value) is list:
            return self.stand_ins.container(proxy, self.sequence(proxy, value, name))
        if type(value) is dict:
            return self.stand_ins.container(proxy, self.mapping(proxy, value, name))
        state = Proxy(self.context.claim(f"{name}_state"))
        self.prologue.append(BoundSymbol(objects.OBJECT_STATE, (proxy,), {}, state))
        return self.stand_ins.object(proxy, type(value), self.mapping(state, vars(value), name))

    def _multiply(self, a: Any, b: Any) -> Any:
        """a * b, recorded in the prologue where either is symbolic."""
        if type(a) is int and type(b) is int:
            return a * b
        if type(a) is int and a == 1:
            return b
        if type(b) is int and b == 1:
            return a
        product = NumberProxy(int, getattr(a, "value", a) * getattr(b, "value", b), name=self.context.fresh("i"))
        self.prologue.append(BoundSymbol(Prim.MUL, (a, b), {}, product))
        return product

    def shape(self, tensor: torch.Tensor, name: str) -> tuple:
        """The traced shape of tensor argument `name`: a symbolic size (`NumberProxy`) for each dim
        named in `dynamic` (`size_name`) whose size is at least 2, the size itself elsewhere."""
        return tuple(
            NumberProxy(int, n, name=self.context.claim(f"{name}_size{dim}"))
            if n >= 2 and size_name(name, dim) in self.dynamic
            else n
            for dim, n in enumerate(tensor.shape)
        )

    def sequence(self, proxy: Proxy, values: Any, name: str) -> list:
        """Unpacks a tuple/list proxy; returns what the traced function sees for each element."""
        at = len(self.prologue)
        elements, seen = zip(*(self.element(v, f"{name}_{i}") for i, v in enumerate(values))) if values else ((), ())
        self.prologue.insert(at, BoundSymbol(Prim.UNPACK_SEQUENCE, (proxy, len(values)), {}, tuple(elements)))
        return list(seen)

    def mapping(self, proxy: Proxy, values: dict, name: str) -> dict:
        """Unpacks a dict proxy (string keys; int keys too inside arguments, as a cache's per-layer
        flags); returns what the traced function sees."""
        for key in values:
            check(
                isinstance(key, str) or (type(key) is int and name != "kwargs"),
                lambda key=key: f"dict argument {name} has a non-string key {key!r} (int keys only inside arguments)",
                TypeError,
            )
        at = len(self.prologue)
        seen = {}
        elements = []
        for key, v in values.items():
            element, seen[key] = self.element(v, f"{name}_{key}" if name != "kwargs" else key)
            elements.append(element)
        self.prologue.insert(at, BoundSymbol(Prim.UNPACK_DICT, (proxy, tuple(values)), {}, tuple(elements)))
        return seen


def size_name(name: str, dim: int) -> str:
    """How `dynamic` names the size of tensor input `name` along `dim`: 'x.size(1)'."""
    return f"{name}.size({dim})"


# what `dynamic` can hold: a number input's name, or a tensor input's size (`size_name`)
DYNAMIC_NAME = re.compile(r"[A-Za-z_]\w*(\.size\(\d+\))?")


def _view_key(t: torch.Tensor) -> tuple:
    """Equal for two tensors exactly when they are the very same view of the same memory (reading
    or writing one is reading or writing the other); an empty tensor is only itself."""
    if t.numel() == 0:
        return ("empty", id(t))
    return (t.data_ptr(), t.shape, t.stride(), t.dtype, t.device)


def _memory_guards(inputs: _Inputs, context: TraceContext, recorded: list[BoundSymbol]) -> list[BoundSymbol] | None:
    """The prologue guards on argument memory (see the module), or None when the trace writes
    into an argument passed twice without merging it: it must be traced again, merged."""
    roots = {id(aliasing.root(context, b.args[0])) for b in leaves(recorded) if b.sym in INPLACE}
    representatives = [(p, t) for i, (p, t, g) in enumerate(inputs.tensors) if g == i]
    merged = len(representatives) < len(inputs.tensors)
    writes_arguments = any(id(p) in roots for p, _ in representatives)
    if writes_arguments and inputs.passed_twice and not merged:
        return None
    guards = []
    if merged or writes_arguments:
        if writes_arguments:
            _check_no_partial_overlap(representatives)
        tensors = tuple(p for p, _, _ in inputs.tensors)
        groups = tuple(g for _, _, g in inputs.tensors) if merged else None
        guards.append(BoundSymbol(Prim.CHECK_ALIASING, (tensors, groups, writes_arguments), {}, None))
    if roots or aliasing.strides_were_read(context):
        guards += [BoundSymbol(Prim.CHECK_STRIDES, guard, {}, None) for guard in aliasing.relied_on_inputs(context)]
    return guards


def _check_no_partial_overlap(tensors: list[tuple[TensorProxy, torch.Tensor]]) -> None:
    by_storage: dict[int, list[tuple[TensorProxy, torch.Tensor]]] = {}
    for p, t in tensors:
        if t.numel():
            by_storage.setdefault(t.untyped_storage().data_ptr(), []).append((p, t))
    for group in by_storage.values():
        check(
            len(group) < 2 or not overlapping([t for _, t in group]),
            lambda group=group: (
                f"arguments {', '.join(p.name for p, _ in group)} share memory without being the same tensor, "
                "and the function writes into an argument: such overlapping arguments are not supported; "
                "pass separate tensors (or the same tensor object)"
            ),
            NotImplementedError,
        )


def _parameter_names(fn: Callable, count: int) -> list[str]:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return [positional[i] if i < len(positional) else f"arg{i}" for i in range(count)]


def leaves(bsyms: list[BoundSymbol]) -> Iterator[BoundSymbol]:
    """The prims of `bsyms`, in execution order (ops replaced by their decompositions)."""
    for bsym in bsyms:
        if bsym.subsymbols:
            yield from leaves(list(bsym.subsymbols))
        else:
            yield bsym


def _without_guards(bsyms: list[BoundSymbol] | tuple) -> list[BoundSymbol]:
    result = []
    for bsym in bsyms:
        if bsym.sym in GUARDS:
            continue
        if bsym.subsymbols:
            bsym = bsym.replace(subsymbols=tuple(_without_guards(bsym.subsymbols)))
            if not bsym.subsymbols and bsym.output is None and isinstance(bsym.sym, Symbol):
                continue  # an op that only checked something and returned its input
        result.append(bsym)
    return result


def _guards_with_dependencies(bsyms: list[BoundSymbol]) -> list[BoundSymbol]:
    """The guards recorded while tracing, preceded by the number arithmetic they read."""
    flat = list(leaves(bsyms))
    defined_by = {id(p): b for b in flat for p in b.outputs if isinstance(p, NumberProxy)}
    needed: set[int] = set()
    stack = [b for b in flat if b.sym in GUARDS]
    needed.update(id(b) for b in stack)
    while stack:
        for p in stack.pop().inputs:
            producer = defined_by.get(id(p))
            if producer is not None and id(producer) not in needed:
                needed.add(id(producer))
                stack.append(producer)
    seen_guards: set[tuple] = set()
    result = []
    for b in flat:
        if id(b) not in needed:
            continue
        if b.sym in GUARDS:
            key = (b.sym, tuple(a.name if isinstance(a, Proxy) else (type(a), a) for a in b.args))
            if key in seen_guards:
                continue
            seen_guards.add(key)
        result.append(b)
    return result


@dataclass(frozen=True)
class Traced:
    """A traced call: its prologue and computation traces, and what it did to the objects, lists
    and dicts it was given (tracing/objects.py). When `writes` is not empty, the prologue returns
    its targets after the computation's inputs and the computation returns `(output, values)`:
    `writes.around` makes the entry's computation of it; `complex_outputs.around`, of complex outputs;
    `row_major.around`, of outputs eager lays out row-major (compiler/ops/row_major.py);
    `attribute_writes.around`, of the module attributes it reassigned (tracing/captured_tensors.py)."""

    prologue: Trace
    computation: Trace
    writes: objects.ObjectWrites
    complex_outputs: complex_values.ComplexOutputs = field(default_factory=complex_values.ComplexOutputs)
    attribute_writes: captured_tensors.AttributeWrites = field(default_factory=captured_tensors.AttributeWrites)
    row_major: row_major.RowMajorOutputs = field(default_factory=row_major.RowMajorOutputs)  # ops/row_major.py
    autocast: tuple = ()  # the autocast state traced under (ops/autocast.py), () when off


def trace(
    fn: Callable,
    args: tuple,
    kwargs: dict,
    *,
    numbers: Numbers = Numbers.CONSTANT,
    dynamic: frozenset[str] = frozenset(),
    exact_strides: bool = False,
) -> tuple[Trace, Trace]:
    """Traces `fn(*args, **kwargs)`; returns (prologue trace, computation trace). `numbers`,
    `dynamic` and `exact_strides` (also guard every tensor's strides) as the module says. A call
    that changes an object or list it was given needs `trace_call`, which says what to write back."""
    traced = trace_call(fn, args, kwargs, numbers=numbers, dynamic=dynamic, exact_strides=exact_strides)
    check(
        not traced.writes and not traced.attribute_writes,
        lambda: f"{getattr(fn, '__qualname__', fn)} changes an object it was given; frontend.trace_call writes it back",
        NotImplementedError,
    )
    return traced.prologue, traced.computation


def trace_call(
    fn: Callable,
    args: tuple,
    kwargs: dict,
    *,
    numbers: Numbers = Numbers.CONSTANT,
    dynamic: frozenset[str] = frozenset(),
    exact_strides: bool = False,
) -> Traced:
    """`trace`, with the write-backs onto the objects the call was given (see `Traced`)."""
    symbolic = numbers is Numbers.SYMBOLIC
    traced = _trace(fn, args, kwargs, symbolic, dynamic, False, exact_strides)
    return traced if traced is not None else _trace(fn, args, kwargs, symbolic, dynamic, True, exact_strides)


def _stride_guards(inputs: _Inputs, memory_guards: list[BoundSymbol]) -> list[BoundSymbol]:
    """`check_strides` of every tensor input that the memory guards do not check already (strides
    written in the symbolic sizes they follow, see dense_strides.py)."""
    guarded = {id(b.args[0]) for b in memory_guards if b.sym is Prim.CHECK_STRIDES}
    return [
        BoundSymbol(Prim.CHECK_STRIDES, (p, inputs.strides.get(id(p), tuple(t.stride()))), {}, None)
        for i, (p, t, g) in enumerate(inputs.tensors)
        if g == i and id(p) not in guarded
    ]


def _trace(
    fn: Callable,
    args: tuple,
    kwargs: dict,
    symbolic: bool,
    dynamic: frozenset[str],
    merge_same: bool,
    exact_strides: bool,
) -> Traced | None:
    context = TraceContext()
    args_proxy, kwargs_proxy = Proxy(context.claim("args")), Proxy(context.claim("kwargs"))
    inputs = _Inputs(context, symbolic, merge_same, dynamic, exact_strides)
    try:
        return _trace_inputs(fn, args, kwargs, context, inputs, args_proxy, kwargs_proxy, exact_strides)
    finally:
        inputs.stand_ins.release()


def _trace_inputs(
    fn: Callable,
    args: tuple,
    kwargs: dict,
    context: TraceContext,
    inputs: _Inputs,
    args_proxy: Proxy,
    kwargs_proxy: Proxy,
    exact_strides: bool,
) -> Traced | None:
    names = _parameter_names(fn, len(args))
    autocast_state = autocast.state()
    at = len(inputs.prologue)
    arg_elements, fn_args = [], []
    for value, name in zip(args, names):
        element, seen = inputs.element(value, name)
        arg_elements.append(element)
        fn_args.append(seen)
    inputs.prologue.insert(at, BoundSymbol(Prim.UNPACK_SEQUENCE, (args_proxy, len(args)), {}, tuple(arg_elements)))
    fn_kwargs = inputs.mapping(kwargs_proxy, kwargs, "kwargs")

    # NOTE: torch.compiler.is_compiling() holds while tracing: torch's optimizers skip eager-only checks, `.item()`
    context.captured = capture = captured_tensors.Capture(fn, inputs.element, inputs.prologue)
    free = free_values.FreeValues.of(fn, context, inputs)
    with tracing(context), TracingMode(), compiling(), BYPASSES.applied(), program_running(), capture, free:
        output = capture.output(explaining_unbound_methods(fn, fn_args, fn_kwargs))
        attribute_writes = capture.writes()
        output, complex_outputs = complex_values.packed(attribute_writes.output(output))
    captured_tensors.check_output(output)
    output, writes = inputs.stand_ins.writes(output)

    recorded = context.bsyms
    memory_guards = _memory_guards(inputs, context, recorded)
    if memory_guards is None:
        return None
    if exact_strides:
        memory_guards += _stride_guards(inputs, memory_guards)
    memory_guards += inputs.places.guard(bool(writes.writes), lambda: Proxy(context.claim("places")))
    computation_inputs = tuple(inputs.computation_inputs)
    prologue = Trace(
        (args_proxy, kwargs_proxy),
        [BoundSymbol(Prim.CHECK_AUTOCAST, (autocast_state,), {}, None)]
        + free_values.guards(free)
        + inputs.prologue
        + memory_guards
        + _guards_with_dependencies(recorded),
        computation_inputs + writes.targets,
        name="prologue",
    )
    computation = Trace(computation_inputs, _without_guards(recorded), (output, writes.values) if writes else output)
    _check_outputs_defined(computation)
    contiguous = row_major.row_major_outputs(context, output, computation_inputs, list(leaves(recorded)))
    return Traced(prologue, computation, writes, complex_outputs, attribute_writes, contiguous, autocast_state)


def _check_outputs_defined(computation: Trace) -> None:
    defined = {id(p) for p in computation.inputs}
    for b in leaves(computation.bsyms):
        defined.update(id(p) for p in b.outputs)
    for p in proxies_in(computation.output):
        check(
            id(p) in defined,
            lambda p=p: (
                f"the jitted function returned {p.name}, which it did not compute in this call "
                "(a proxy leaked from another trace)"
            ),
            TracingError,
        )
