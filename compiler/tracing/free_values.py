"""Free values: the plain Python values a traced program reads from globals and closure cells.

A trace bakes such values in: `t * SCALE` records the number SCALE held, `act(t)` the ops of the
function `act` named, `k[0]` the item of a closed-over list. Eager reads them again on every call,
so a program whose global or closure variable changed after a call must not keep the old trace.
While tracing, `FreeValues` notes the code of every frame of the program that runs an op (the
stack walked at each dispatch), and, statically, the functions those name as globals; of each
such code it reads the globals its bytecode loads and its function's closure cells. The
prologue then guards (`check_free_values`, a line per value):
- numbers, strings, flags, None, dtypes and devices: equal, of the same type;
- lists, tuples and dicts of those (up to `MAX_ITEMS` items): equal to a copy taken at tracing;
- functions and other callables (`act = F.relu`): the same object;
- configuration-like objects (dataclass instances, namespaces, anything with `to_dict`): the same
  object, and each of its plain attributes equal (a frozen dataclass's attributes cannot be set
  again: the same object is enough);
- an `nn.Module` the program calls (`jit(lambda x: model(x))`): the same object, and its
  submodules' train/eval modes (its tensors are the trace's inputs: captured_tensors.py).
A call where one differs misses the entry and compiles its own (returning to an old value finds
the old entry again); `examine.recompilations` names the variable. Under automatic dynamic, a
number that changed is symbolic from the next compilation on, as a number argument would be: the
prologue reads it from its place (`read_free_value`) and the program, while traced, finds its
proxy there, so a learning rate or step count kept in a global compiles twice, not per value. Modules, classes, tensors
(captured as inputs: captured_tensors.py) and other objects are not guarded, nor is the code of
the standard library and of installed packages (transformers' decorators and module flags: set
when imported, read by every forward): only the program's own files are read.

NOTE: only places that outlive a call are guarded: a function the traced call itself made (a
nested def or lambda) closes over that call's variables, which are traced values or derived
from the arguments.
"""

from __future__ import annotations

import copy
import dataclasses
import dis
import functools
import operator
import os
import sys
import sysconfig
import types
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch

from compiler.core.errors import GuardFailure, short_repr
from compiler.core.ir import BoundSymbol, NumberProxy, Symbol
from compiler.prims import Prim
from compiler.tracing.captured_tensors import is_program_code
from compiler.tracing.settings import PLAIN, is_config

MAX_ITEMS = 256  # the most leaves a guarded list, tuple or dict may hold
_EQUAL = (*PLAIN, torch.dtype, torch.device)
_NAMESPACES = (types.SimpleNamespace,)
_GENERATED = ("<eval_with_key>", "<fusebench")  # an FX graph's code, the compiler's own


def _leaves(value: Any, budget: list[int]) -> bool:
    """Whether `value` is a plain value or a container of them within the budget of leaves."""
    if type(value) in _EQUAL:
        budget[0] -= 1
        return budget[0] >= 0
    if type(value) in (list, tuple):
        return all(_leaves(v, budget) for v in value)
    if type(value) is dict:
        return all(type(k) in _EQUAL and _leaves(v, budget) for k, v in value.items())
    return False


def _is_settings_object(value: Any) -> bool:
    return (
        (dataclasses.is_dataclass(value) and not isinstance(value, type))
        or isinstance(value, _NAMESPACES)
        or (is_config(value) and not callable(value))
    )


def _frozen_dataclass(value: Any) -> bool:
    """Whether `value` is an instance of a frozen dataclass (whose attributes raise when set)."""
    params = getattr(type(value), "__dataclass_params__", None)
    return params is not None and params.frozen and dataclasses.is_dataclass(value)


@dataclasses.dataclass(frozen=True, eq=False)
class _Place:
    """Global `name` of module `where` (`holder` its globals), or a closure variable of function
    `where` (`holder` its cell), or attribute `name` of the object a place holds (`holder` its `__dict__`)."""

    kind: str
    holder: Any
    name: str
    where: str

    def __repr__(self) -> str:
        kinds = {"global": "global", "cell": "closure variable", "attribute": "attribute"}
        if self.kind == "modes":
            return f"train/eval modes of module {self.name} of {self.where}"
        return f"{kinds[self.kind]} {self.name} of {self.where}"

    @property
    def key(self) -> tuple[int, str]:
        return id(self.holder), self.name


# the places guarded so far, by the name automatic dynamic gives them (`dynamic_name`)
_NAMED: weakref.WeakValueDictionary[str, _Place] = weakref.WeakValueDictionary()


def dynamic_name(place: _Place) -> str:
    """How `jit`'s set of symbolic names names `place` ('global SCALE of __main__'; with the
    holder's id where another place of that name is alive: two closures of one function)."""
    name = repr(place)
    if _NAMED.setdefault(name, place).key != place.key:
        name = f"{name} [{id(place.holder):x}]"
        _NAMED.setdefault(name, place)
    return name


class _Shown:
    """An object a guard compared by identity, shown on one line with its address."""

    def __init__(self, value: Any) -> None:
        self.text = f"{short_repr(value, 50)} at {id(value):#x}"

    def __repr__(self) -> str:
        return self.text


class _Missing:
    def __repr__(self) -> str:
        return "<not set>"


MISSING = _Missing()


def _contents(cell: Any) -> Any:
    """What a closure cell holds, or `MISSING`."""
    try:
        return cell.cell_contents
    except ValueError:
        return MISSING


def _read(place: _Place) -> Any:
    if place.kind == "modes":
        return tuple(map(_TRAINING, place.holder))
    return _contents(place.holder) if place.kind == "cell" else place.holder.get(place.name, MISSING)


_TRAINING = operator.attrgetter("training")


def _write(place: _Place, value: Any) -> None:
    if place.kind == "cell":
        place.holder.cell_contents = value
    elif value is not MISSING:
        place.holder[place.name] = value
    else:
        place.holder.pop(place.name, None)


def read_free_value(place: _Place) -> Any:
    """Prologue: the value a global or closure variable made symbolic holds now."""
    return _read(place)


READ_FREE_VALUE = Symbol("read_free_value", impl=read_free_value)


class FreeValues:
    """The free values one trace read (see the module): the places guarded by identity (`same`)
    and by type and equality (`equal`), and the values they held after tracing."""

    def __init__(self, stop: types.FrameType | None = None, symbolic: Sequence[tuple[_Place, Any]] = ()) -> None:
        self.stop = stop  # the tracer's frame: the program's frames are inside it
        self.codes: set[types.CodeType] = set()  # the program's code read so far
        self.skipped: set[types.CodeType] = set()  # torch's and the compiler's
        self.symbolic = list(symbolic)  # (place, its number's proxy): inputs of the trace, not guarded
        self.places: set[tuple[int, str]] = {place.key for place, _ in self.symbolic}
        self._before: list[Any] = []
        self.same: list[_Place] = []  # guarded by identity
        self.equal: list[_Place] = []  # guarded by type and equality
        self.expected_same: tuple = ()
        self.expected_equal: tuple = ()
        self.types: tuple = ()
        self._made: set[types.CodeType] = set()  # code of functions made by a running frame
        self._functions: dict[types.CodeType, types.FunctionType] = {}  # the functions seen, by code

    @classmethod
    def of(cls, fn: Callable, context: Any, inputs: Any) -> FreeValues:
        """The free values of `fn`, traced by the caller (whose frame bounds the program's) in
        `context`, which calls `seen_op` at each op. The numbers of the places named in
        `inputs.dynamic` (automatic dynamic: their values changed) become symbolic inputs of the
        trace, which the prologue reads from their places (frontend's `_Inputs`)."""
        symbolic = []
        for name in sorted(inputs.dynamic):
            place = _NAMED.get(name)
            value = _read(place) if place is not None else None
            if type(value) in (int, float, bool):
                proxy = NumberProxy(type(value), value, name=context.claim(place.name))
                inputs.prologue.append(BoundSymbol(READ_FREE_VALUE, (place,), {}, proxy))
                inputs.prologue.append(BoundSymbol(Prim.CHECK_TYPE, (proxy, type(value)), {}, None))
                inputs.computation_inputs.append(proxy)
                symbolic.append((place, proxy))
        values = cls(sys._getframe(1), symbolic)
        values.add_function(fn)
        context.seen_op = values.seen_op
        return values

    def __enter__(self) -> FreeValues:
        """Puts the symbolic numbers' proxies in their places, for the program to read."""
        self._before = [_read(place) for place, _ in self.symbolic]
        for place, proxy in self.symbolic:
            _write(place, proxy)
        return self

    def __exit__(self, *exc: Any) -> None:
        for (place, _), value in zip(self.symbolic, self._before):
            _write(place, value)

    def seen_op(self) -> None:
        """Notes the program's frames running now (called at each op the program calls)."""
        frame = sys._getframe(1)
        running = []
        while frame is not None and frame is not self.stop:
            code = frame.f_code
            if code not in self.codes and code not in self.skipped:
                if _is_program(code):
                    running.append(frame)
                else:
                    self.skipped.add(code)
            frame = frame.f_back
        for frame in running:
            self._made.update(c for c in frame.f_code.co_consts if type(c) is types.CodeType)
        for frame in reversed(running):  # outermost first: it tells which functions the others are
            code = frame.f_code
            known = self._functions.get(code)
            # NOTE: the cells of a closure not reached as a function (one passed in an argument) are
            # not read: finding its function from its frame would scan every object (gc)
            cells = _cells(known) if known is not None and code not in self._made else {}
            self._code(code, frame.f_globals, cells)

    def add_function(self, fn: Any, file: str | None = None) -> None:
        """Notes function `fn` (the jitted one; or one a noted code names, where it is defined in
        `file`, that code's file: a helper of the program, not a library it calls) and what it names."""
        fn = getattr(fn, "__func__", fn)
        if type(fn) is not types.FunctionType or not _is_program(fn.__code__):
            return
        self._functions.setdefault(fn.__code__, fn)
        if file is None or fn.__code__.co_filename == file:
            self._code(fn.__code__, fn.__globals__, _cells(fn))

    def _code(self, code: types.CodeType, globals_: dict, cells: dict[str, Any]) -> None:
        if code in self.codes:
            return
        self.codes.add(code)
        where = globals_.get("__name__", "?")
        for name in sorted(_global_names(code)):
            if name in globals_:
                self._guard(_Place("global", globals_, name, where), globals_[name], code.co_filename)
        for name, cell in cells.items():
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            self._guard(_Place("cell", cell, name, getattr(code, "co_qualname", code.co_name)), value, code.co_filename)

    def _guard(self, place: _Place, value: Any, file: str) -> None:
        if place.key in self.places:
            return
        self.places.add(place.key)
        dynamic_name(place)
        if _leaves(value, [MAX_ITEMS]):
            self.equal.append(place)
        elif isinstance(value, torch.nn.Module):
            self.same.append(place)  # NOTE: its tensors are inputs read from it (captured_tensors.py)
            modes = _Place("modes", list(value.modules()), place.name, place.where)
            self.places.add(modes.key)
            self.equal.append(modes)
        elif callable(value) and not isinstance(value, type):
            self.same.append(place)
            self.add_function(value, file)
        elif _is_settings_object(value):
            self.same.append(place)
            if _frozen_dataclass(value):
                return
            where = f"{place.name} ({type(value).__name__})"
            for name, item in vars(value).items():
                if type(item) in _EQUAL:
                    self._guard(_Place("attribute", vars(value), name, where), item, file)

    def freeze(self) -> None:
        """Takes the values the guards expect, after tracing: a value the program itself changed
        (an item appended to a list, a counter) is then as later calls, which do not run the
        program's Python again, leave it."""
        self.expected_same = tuple(map(_read, self.same))
        self.expected_equal = tuple(copy.deepcopy(_read(p)) for p in self.equal)

    def __bool__(self) -> bool:
        return bool(self.same or self.equal)

    def changed(self) -> list[tuple[_Place, Any, Any]]:
        """The guarded places whose values differ now: (place, expected, actual) each."""
        found = []
        for i, (place, old) in enumerate(zip(self.same + self.equal, self.expected_same + self.expected_equal)):
            new = _read(place)
            try:
                differs = new is not old if i < len(self.same) else type(new) is not type(old) or new != old
            except Exception:
                differs = True
            if differs:
                found.append((place, old, new) if i >= len(self.same) else (place, _Shown(old), _Shown(new)))
        return found

    def __repr__(self) -> str:
        names = [repr(p) for p in self.same + self.equal]
        shown = ", ".join(names[:3]) + (f", and {len(names) - 3} more" if len(names) > 3 else "")
        return f"<{len(names)} free value{'s' if len(names) != 1 else ''}: {shown}>"


def check_free_values(values: FreeValues) -> None:
    """Prologue: raises `GuardFailure` when a guarded value differs from the traced call's."""
    changed = values.changed()
    if changed:
        place, expected, actual = changed[0]
        raise GuardFailure(f"{place!r} holds {actual!r}, not {expected!r}")


def _source(bsym: BoundSymbol, g: Any) -> list[str]:
    """`check_free_values` as inline lines of the prologue (runtime/guard_source.py): a dict read
    and a comparison per value."""
    (values,) = bsym.args
    fail = g.bind(GuardFailure, "GuardFailure")

    def read(place: _Place) -> str:
        if place.kind == "modes":
            return f"tuple(map({g.bind(_TRAINING, 'training')}, {g.bind(place.holder, 'modules')}))"
        if place.kind == "cell":
            return f"{g.bind(_contents, 'contents')}({g.bind(place.holder, 'cell')})"
        return f"{g.bind(place.holder, 'namespace')}.get({place.name!r}, {g.bind(MISSING, 'missing')})"

    lines = [
        f"if {read(p)} is not {g.bind(e, 'free')}: raise {fail}" for p, e in zip(values.same, values.expected_same)
    ]
    for place, expected in zip(values.equal, values.expected_equal):
        kind, value = g.bind(type(expected), "type"), g.bind(expected, "free")
        lines.append(f"if type(_free := {read(place)}) is not {kind} or _free != {value}: raise {fail}")
    return lines


check_free_values.inline_source = _source  # type: ignore[attr-defined]


CHECK_FREE_VALUES = Symbol("check_free_values", impl=check_free_values, checks=True)


def guards(values: FreeValues) -> list[BoundSymbol]:
    """The prologue's line checking `values` (none where the trace read no free value)."""
    values.freeze()
    return [BoundSymbol(CHECK_FREE_VALUES, (values,), {}, None)] if values else []


def _is_program(code: types.CodeType) -> bool:
    filename = code.co_filename
    return is_program_code(filename) and not filename.startswith(_GENERATED) and not _installed(filename)


@functools.cache
def _installed(filename: str) -> bool:
    """Whether `filename` is the standard library's or an installed package's (in a folder of
    `sys.path` that holds `.dist-info` folders: site-packages, a `pip --target` folder)."""
    path = os.path.abspath(filename)
    return any(path.startswith(folder) for folder in _library_folders())


@functools.cache
def _library_folders() -> tuple[str, ...]:
    folders = {sysconfig.get_paths()["stdlib"]}
    for entry in sys.path:
        try:
            if os.path.isdir(entry) and any(name.endswith(".dist-info") for name in os.listdir(entry)):
                folders.add(os.path.abspath(entry))
        except OSError:
            continue
    return tuple(os.path.join(folder, "") for folder in folders)


def _global_names(code: types.CodeType) -> set[str]:
    """The globals `code` (and the code nested in it) loads."""
    names = {i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    for const in code.co_consts:
        if type(const) is types.CodeType:
            names |= _global_names(const)
    return names


def _cells(fn: types.FunctionType) -> dict[str, Any]:
    return dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
