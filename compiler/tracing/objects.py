"""Objects passed to a jitted function (a Hugging Face cache and its layers): their state as
inputs, their structure guarded, and what the call did to them written back after it.

An object whose state is its attributes (`vars(obj)`: a `DynamicCache`, its `DynamicLayer`s, a
`StaticCache`, an `EncoderDecoderCache`, a dataclass) is unpacked by the frontend like a dict of
arguments: the prologue checks its class (`check_type`), reads its attributes (`object_state`)
and unpacks them by name (`unpack_dict`: the same attribute names), and each attribute is then an
argument of its own: a tensor an input (guarded by metadata, never by value), a number a baked-in
constant or a symbolic input, None, a flag, a device or a class baked in and guarded, a list
(the layers) or dict unpacked, an object unpacked the same way. So a call whose cache has another
class, another number of layers, a layer not yet initialised (keys None, `is_initialized` False)
where the traced one was, or another flag, misses the entry and compiles its own.

The traced function receives a stand-in: a new instance of the object's class (its `__init__` not
run) whose attributes are what the function sees for each (proxies, constants, stand-ins), and
a new list or dict for each list or dict. What the function does to the stand-ins is the call's
effect on the caller's objects, written back after each call (`ObjectWrites`):
- writes into a tensor attribute's memory (a `StaticCache`'s `index_copy_`, its length's
  `add_`) are in-place writes into an input, made functional and written back by the trace;
- an attribute given a new value (`self.keys = torch.cat(...)`, `self.is_initialized = True`,
  a lazily created tensor, an attribute added or deleted) is set on the caller's object after the
  computation, from the computation's extra outputs and the constants it was traced with;
- a list or dict changed in place (a cache appending layers it creates lazily) gets the new items
  in place.
A value written back is rebuilt per call: proxies from the computation's outputs, a stand-in as
the caller's own object, a new object or container the function built as a new one per call,
other values as traced. A stand-in the function returns is the caller's own object too (a model
returns the cache it was given): the output holds a `CallerObject` marker in its place, replaced
after the call.

A dict that is a dataclass and keeps its fields as attributes too, its items exactly its fields
that are not None (transformers' `ModelOutput`: `encoder_outputs`, which `generate()` passes an
encoder-decoder's forward), is such an object: unpacked by its attributes, its stand-in given the
same items (`_is_field_mapping`).

An object, list or dict reached at several places of the arguments (layers sharing one object,
a list holding an object twice) is unpacked at the first place only; every later place sees the
same stand-in, so the function's writes through either place are one object's, written back once
(`Places`). Where a place was not unpacked, or the call writes back, the prologue's guard on
`first_places` (per place, the first place holding the same value) makes a call share objects
exactly as the traced call did: a call whose places share otherwise, or not at all, misses the
entry. An object that holds itself is not supported.

NOTE: the writes are part of the entry, so they are what the trace did: a call that would change
another attribute takes another branch, guarded by the values the branch read.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from compiler.core.ir import BoundSymbol, NumberProxy, Proxy, Symbol
from compiler.prims import Prim
from compiler.tracing.structure import STAND_INS, Spec

_LEAF = Spec("leaf")
_NOT_FLATTENED = (
    torch.Tensor, torch.nn.Module, type, types.FunctionType, types.MethodType, types.ModuleType, list, tuple, dict,
)  # fmt: skip


def _is_field_mapping(value: Any) -> bool:
    """Whether `value` is a dict subclass and a dataclass whose items are exactly its attributes that
    are not None, in order (transformers' `ModelOutput`): its attributes are all its state."""
    if type(value) is dict or not isinstance(value, dict) or not dataclasses.is_dataclass(value):
        return False
    state = getattr(value, "__dict__", None)
    if type(state) is not dict:
        return False
    fields = [name for name, v in state.items() if v is not None]
    return list(value) == fields and all(value[name] is state[name] for name in fields)


def is_object_argument(value: Any) -> bool:
    """Whether the frontend unpacks `value` as an object: an instance of a plain Python class that
    keeps its state in a `__dict__` (not a tensor, module, class or function), or a dict that is
    such an object's fields (`_is_field_mapping`)."""
    if _is_field_mapping(value):
        return True
    if isinstance(value, _NOT_FLATTENED) or callable(value):
        return False
    # NOTE: state in slots (other than abc.ABC's empty ones) would be missed
    slots = any(getattr(c, "__slots__", ()) for c in type(value).__mro__)
    return type(getattr(value, "__dict__", None)) is dict and not slots


_NO_STATE: dict = {}


def _object_state(obj: Any) -> dict:
    """Prologue: the attributes of `obj` (whose class `check_type` guarded just before)."""
    return getattr(obj, "__dict__", _NO_STATE)


OBJECT_STATE = Symbol("object_state", impl=_object_state)


def _first_places(values: tuple) -> tuple[int, ...]:
    """Prologue: per place, the first place holding the very same value (the guard compares it
    with the traced call's)."""
    first: dict[int, int] = {}
    return tuple(first.setdefault(id(value), index) for index, value in enumerate(values))


FIRST_PLACES = Symbol("first_places", impl=_first_places)


class Places:
    """The places where the objects, lists and dicts of the arguments are reached, in the order
    they are unpacked, and for each which place first held the same value (see the module)."""

    def __init__(self) -> None:
        self.proxies: list[Proxy] = []  # prologue proxy of each place
        self.groups: list[int] = []  # per place: the first place holding the same value
        self._first: dict[int, int] = {}  # id(value) -> its first place
        self._seen: dict[int, Any] = {}  # id(value) -> what the traced function sees for it
        self._open: dict[int, str] = {}  # id(value) -> name: being unpacked

    def again(self, value: Any, proxy: Proxy, name: str) -> tuple[bool, Any]:
        """(True, what the function sees) where `value` was reached at an earlier place, now also
        at `proxy`; (False, None) where this is its first place, to unpack before `unpacked`."""
        key = id(value)
        if key in self._open:
            raise NotImplementedError(
                f"argument {name} is the {type(value).__name__} {self._open[key]} it is part of: an object, "
                "list or dict that holds itself is not supported"
            )
        if key not in self._first:
            self._open[key] = name
            return False, None
        self.proxies.append(proxy)
        self.groups.append(self._first[key])
        return True, self._seen[key]

    def unpacked(self, value: Any, proxy: Proxy, seen: Any) -> Any:
        """Records the first place of `value`, unpacked as `proxy`; returns `seen`, what the
        function sees for it there and at every later place."""
        key = id(value)
        del self._open[key]
        self._first[key] = len(self.proxies)
        self._seen[key] = seen
        self.proxies.append(proxy)
        self.groups.append(self._first[key])
        return seen

    def guard(self, writes_back: bool, new_proxy: Callable[[], Proxy]) -> list[BoundSymbol]:
        """`places = first_places(...)` (`places` from `new_proxy`) and its `check_value` where the
        entry depends on which places share a value: some place was not unpacked (it shares an
        earlier one's), or the call writes back (two places sharing an object would take both
        places' writes)."""
        shared = any(group != index for index, group in enumerate(self.groups))
        if len(self.proxies) < 2 or not (shared or writes_back):
            return []
        places = new_proxy()
        return [
            BoundSymbol(FIRST_PLACES, (tuple(self.proxies),), {}, places),
            BoundSymbol(Prim.CHECK_VALUE, (places, tuple(self.groups)), {}, None),
        ]


@dataclass(frozen=True)
class CallerObject:
    """In a computation's output: the caller's object number `index` among the call's targets."""

    index: int


class _Output:
    """In a write's template: the next of the computation's written-back values."""


_FROM_OUTPUT = _Output()


@dataclass(frozen=True)
class Write:
    """One write-back onto target `target`: `kind` "set" (attribute `name` := the value),
    "delete" (attribute `name`), "items" (a list's or dict's items := the value's)."""

    target: int
    kind: str
    name: str | None = None
    spec: Spec = _LEAF
    template: tuple = ()  # the value's leaves: constants, CallerObject, or _FROM_OUTPUT


class StandIns:
    """The objects and containers one trace was given, their stand-ins, and what they were given."""

    def __init__(self) -> None:
        self.targets: list[Proxy] = []  # prologue proxies of the caller's objects and containers
        self.stand_ins: list[Any] = []
        self.given: list[Any] = []  # per target: a copy of what its stand-in started with
        self.index: dict[int, int] = {}  # id(stand-in) -> target index

    def object(self, proxy: Proxy, cls: type, attributes: dict) -> Any:
        """A stand-in of class `cls` with these attributes, for the object unpacked as `proxy` (a
        dict subclass's also with its items: its attributes that are not None, `_is_field_mapping`)."""
        if issubclass(cls, dict):
            stand_in = cls.__new__(cls)
            # NOTE: the item setter of the dict class it derives from (the class's own would run its code)
            storage = next(c for c in cls.__mro__ if c.__module__ in ("builtins", "collections"))
            for name, value in attributes.items():
                if value is not None:
                    storage.__setitem__(stand_in, name, value)
        else:
            stand_in = object.__new__(cls)
        stand_in.__dict__.update(attributes)
        self._add(proxy, stand_in, dict(attributes))
        STAND_INS.add(stand_in)
        return stand_in

    def container(self, proxy: Proxy, seen: list | dict) -> list | dict:
        """Registers the list or dict the traced function sees for argument `proxy`."""
        self._add(proxy, seen, list(seen) if isinstance(seen, list) else dict(seen))
        return seen

    def _add(self, proxy: Proxy, stand_in: Any, given: Any) -> None:
        self.index[id(stand_in)] = len(self.targets)
        self.targets.append(proxy)
        self.stand_ins.append(stand_in)
        self.given.append(given)

    def release(self) -> None:
        """The trace is over: its stand-ins are no longer live."""
        for stand_in in self.stand_ins:
            STAND_INS.discard(stand_in)

    def writes(self, output: Any) -> tuple[Any, ObjectWrites]:
        """(the output with `CallerObject`s in place of stand-ins, the writes the call made)."""
        values: list[Proxy] = []
        writes: list[Write] = []
        used: set[int] = set()
        for index, (stand_in, given) in enumerate(zip(self.stand_ins, self.given)):
            for kind, name, value in _changes(stand_in, given):
                template: list = []
                spec = _LEAF if kind == "delete" else self._value_spec(value, template, values, used, set())
                writes.append(Write(index, kind, name, spec, tuple(template)))
        returned: set[int] = set()
        output = self._replace_stand_ins(output, returned)
        order = sorted(used | returned | {w.target for w in writes})
        position = {target: i for i, target in enumerate(order)}
        writes = [_renumbered(w, position) for w in writes]
        output = _renumber_output(output, position)
        targets = tuple(self.targets[t] for t in order)
        return output, ObjectWrites(targets, tuple(writes), tuple(values), bool(returned))

    def _value_spec(self, value: Any, template: list, values: list, used: set[int], path: set[int]) -> Spec:
        """The spec rebuilding `value` per call from `template` (see `Write`)."""
        target = self.index.get(id(value))
        if target is not None:
            used.add(target)
            template.append(CallerObject(target))
            return _LEAF
        if isinstance(value, (Proxy, NumberProxy)):
            values.append(value)
            template.append(_FROM_OUTPUT)
            return _LEAF
        if id(value) in path:
            raise NotImplementedError(
                f"the jitted function stored a {type(value).__name__} that contains itself into an argument "
                "object; such cycles are not written back"
            )
        inner = path | {id(value)}
        if type(value) in (list, tuple):
            children = tuple(self._value_spec(v, template, values, used, inner) for v in value)
            return Spec(type(value).__name__, type(value), (), children)
        if type(value) is dict:
            children = tuple(self._value_spec(v, template, values, used, inner) for v in value.values())
            return Spec("dict", dict, tuple(value), children)
        if is_object_argument(value):  # an object the function built: a new one per call
            attributes = vars(value)
            children = tuple(self._value_spec(v, template, values, used, inner) for v in attributes.values())
            return Spec("object", type(value), tuple(attributes), children)
        template.append(value)
        return _LEAF

    def _replace_stand_ins(self, value: Any, returned: set[int]) -> Any:
        target = self.index.get(id(value))
        if target is not None and type(value) not in (list, dict):
            returned.add(target)
            return CallerObject(target)
        if type(value) in (list, tuple):
            return type(value)(self._replace_stand_ins(v, returned) for v in value)
        if type(value) is dict:
            return {k: self._replace_stand_ins(v, returned) for k, v in value.items()}
        return value


def _changes(stand_in: Any, given: Any) -> list[tuple[str, Any, Any]]:
    """What the function did to one stand-in: (kind, attribute name, new value) per write."""
    if type(stand_in) is list:
        same = len(stand_in) == len(given) and all(a is b for a, b in zip(stand_in, given))
        return [] if same else [("items", None, list(stand_in))]
    if type(stand_in) is dict:
        same = stand_in.keys() == given.keys() and all(stand_in[k] is given[k] for k in given)
        return [] if same else [("items", None, dict(stand_in))]
    now = stand_in.__dict__
    changes: list[tuple[str, Any, Any]] = [("delete", name, None) for name in given if name not in now]
    changes += [("set", name, value) for name, value in now.items() if name not in given or value is not given[name]]
    return changes


def _renumber_output(value: Any, position: dict[int, int]) -> Any:
    if isinstance(value, CallerObject):
        return CallerObject(position[value.index])
    if type(value) in (list, tuple):
        return type(value)(_renumber_output(v, position) for v in value)
    if type(value) is dict:
        return {k: _renumber_output(v, position) for k, v in value.items()}
    return value


def _renumbered(write: Write, position: dict[int, int]) -> Write:
    template = tuple(CallerObject(position[t.index]) if isinstance(t, CallerObject) else t for t in write.template)
    return Write(position[write.target], write.kind, write.name, write.spec, template)


@dataclass(frozen=True)
class ObjectWrites:
    """What a traced call did to the objects and containers it was given (see the module).

    targets: their prologue proxies, the prologue's last outputs (after the computation's inputs);
    writes: applied in order after the computation; values: the computation's extra outputs the
    writes read; output_refs: whether the output holds `CallerObject`s to replace."""

    targets: tuple[Proxy, ...]
    writes: tuple[Write, ...]
    values: tuple[Proxy, ...]
    output_refs: bool

    def __bool__(self) -> bool:
        return bool(self.targets)

    def around(self, computation: Callable) -> Callable:
        """`computation` (which returns `(output, values)`) as a callable that takes the targets
        after its inputs, writes back and returns the output."""
        return _WritingBack(computation, self) if self else computation


class _WritingBack:
    """Runs an entry's computation, then the call's writes onto the caller's objects."""

    def __init__(self, computation: Callable, writes: ObjectWrites) -> None:
        self.computation = computation
        self.writes = writes
        self.count = len(writes.targets)

    def __call__(self, *inputs: Any) -> Any:
        targets = inputs[-self.count :]
        output, values = self.computation(*inputs[: -self.count])
        computed = iter(values)
        for write in self.writes.writes:
            _apply(write, targets, computed)
        return _caller_objects(output, targets) if self.writes.output_refs else output

    def __getattr__(self, name: str) -> Any:  # NOTE: runners' own attributes (a graphed entry's stats)
        return getattr(self.computation, name)


def _apply(write: Write, targets: tuple, computed: Any) -> None:
    target = targets[write.target]
    if write.kind == "delete":
        delattr(target, write.name)
        return
    leaves = [
        next(computed) if leaf is _FROM_OUTPUT else targets[leaf.index] if type(leaf) is CallerObject else leaf
        for leaf in write.template
    ]
    value = write.spec.rebuild(leaves)
    if write.kind == "set":
        setattr(target, write.name, value)
    elif isinstance(target, list):
        target[:] = value
    else:
        target.clear()
        target.update(value)


def _caller_objects(value: Any, targets: tuple) -> Any:
    if type(value) is CallerObject:
        return targets[value.index]
    if type(value) in (list, tuple):
        return type(value)(_caller_objects(v, targets) for v in value)
    if type(value) is dict:
        return {k: _caller_objects(v, targets) for k, v in value.items()}
    return value
