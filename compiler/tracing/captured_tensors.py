"""Tensors a traced program reads that are not its arguments: plain attributes of the jitted
module and its submodules (Meta's Llama keeps `self.freqs_cis` so), closure variables and globals.

Such a tensor reaches the tracer as a real `torch.Tensor` among an op's arguments (reading an
attribute, a cell or a global runs no torch function). `Capture` is asked for it there
(`TraceContext.captured`, called by ops/registry.py's `dispatch`) and looks for its provenance:
every place, among the jitted module's submodules' attributes (and items of a list, tuple or dict
held in one), the globals the running frames' code names and the closure cells of those frames'
functions (not of a function the traced call made), that holds that very tensor. Where there is
one, the tensor becomes an input of the computation as an argument would (the prologue reads it
from its places on every call with `read_captured`, then guards its shape, dtype and device,
never its values), so:
- a call after the user put another tensor there reads that one, and one of another shape,
  dtype or device misses the entry and compiles its own; writes into its values are seen;
- the program's in-place writes into it are write-backs into an input, landing in that tensor;
- a tensor that requires grad gets its gradient, as an argument would.
Where several places hold the tensor, `read_captured` guards that they still all hold one tensor:
the program read one of them, and a call where they differ misses and traces again. Where no
place holds it (a tensor built outside the compiler and handed on through a value the tracer
cannot follow), the op is refused as before: pass the tensor as an argument.

An attribute of a submodule that held or is given a tensor, and that the program reassigns
(`self.freqs_cis = self.freqs_cis.to(h.device)`), is put back after tracing and set on the module
after each call, as eager leaves it (`AttributeWrites`): to the computation's output for a traced
value, to the constant it was traced with otherwise. Other attributes the program sets stay as
tracing left them (as before tensors were captured): their values are not guarded.

NOTE: only places that outlive a call are provenance: an object the program builds per call holds
the tensor it was given, and reading it from the object of the traced call would be stale.
"""

from __future__ import annotations

import builtins
import functools
import gc
import os
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from compiler.core.errors import GuardFailure, TracingError
from compiler.core.ir import BoundSymbol, Proxy, Symbol
from compiler.ops.complex_proxy import ComplexProxy
from compiler.tracing.module import input_name
from compiler.tracing.structure import flatten

# What a jitted callable lists as the modules whose attributes are provenance: a function returning
# `(qualified name, module)` pairs (runtime/module.py sets it on the traced function of a module).
OWNERS = "__fusebench_tensor_owners__"


class _NotSet:
    """The value of an attribute a module does not have."""

    def __repr__(self) -> str:
        return "NOT_SET"


NOT_SET = _NotSet()
_isinstance = builtins.isinstance  # NOTE: not the program's (tracing/patches.py): proxies are not tensors here
_CONTAINERS = (list, tuple, dict)


@dataclass(frozen=True, eq=False)
class Place:
    """Where a tensor lives between calls: attribute `name` of `holder` (a module, `kind`
    "attribute"), global `name` (`holder` the globals dict, "global") or a closure cell ("cell",
    `name` its variable); `item`: a key or index into the list, tuple or dict held there."""

    kind: str
    holder: Any
    name: str
    where: str  # the module's qualified name, the globals' module, or the function's name
    item: Any = NOT_SET

    def read(self) -> Any:
        """The value held there now, or `NOT_SET`."""
        if self.kind == "attribute":
            value = vars(self.holder).get(self.name, NOT_SET)
        elif self.kind == "global":
            value = self.holder.get(self.name, NOT_SET)
        else:
            try:
                value = self.holder.cell_contents
            except ValueError:
                return NOT_SET
        if self.item is NOT_SET:
            return value
        try:
            return value[self.item] if type(value) in _CONTAINERS else NOT_SET
        except (IndexError, KeyError, TypeError):
            return NOT_SET

    def input_name(self) -> str:
        """The name the computation's input gets ('layers_0_freqs_cis', 'scale')."""
        qualified = f"{self.where}.{self.name}" if self.kind == "attribute" and self.where else self.name
        return input_name(qualified) + ("" if self.item is NOT_SET else f"_{self.item}")

    def __repr__(self) -> str:
        item = "" if self.item is NOT_SET else f"[{self.item!r}]"
        if self.kind == "attribute":
            owner = f"module '{self.where}'" if self.where else "the model"
            return f"attribute {self.name}{item} of {owner} ({type(self.holder).__name__})"
        return f"{'global' if self.kind == 'global' else 'closure variable'} {self.name}{item} of {self.where}"


def _read_captured(places: tuple[Place, ...]) -> torch.Tensor:
    """Prologue: the tensor `places` hold, all of them the same one (else `GuardFailure`)."""
    value = places[0].read()
    for place in places[1:]:
        if place.read() is not value:
            raise GuardFailure(f"{place!r} no longer holds the tensor {places[0]!r} holds")
    if not _isinstance(value, torch.Tensor):
        raise GuardFailure(f"{places[0]!r} holds no tensor")
    return value


READ_CAPTURED = Symbol("read_captured", impl=_read_captured)


def _tensor_items(value: Any) -> list[tuple[Any, torch.Tensor]]:
    """(key, tensor) of the tensors a value holds: itself (key `NOT_SET`), or its list, tuple or
    dict items."""
    if _isinstance(value, torch.Tensor):
        return [(NOT_SET, value)]
    if type(value) in (list, tuple):
        return [(i, v) for i, v in enumerate(value) if _isinstance(v, torch.Tensor)]
    if type(value) is dict:
        return [(k, v) for k, v in value.items() if _isinstance(v, torch.Tensor)]
    return []


class Capture:
    """The tensors one trace captured (see the module). `element(value, name)` makes a tensor an
    input of the trace, with its prologue lines (frontend's `_Inputs.element`)."""

    def __init__(self, fn: Callable, element: Callable[[Any, str], tuple[Proxy, Any]], prologue: list) -> None:
        self.element = element
        self.prologue = prologue
        owners = getattr(fn, OWNERS, None)
        self.modules: list[tuple[str, torch.nn.Module]] = list(owners()) if owners is not None else []
        self.where = {id(m): where for where, m in self.modules}  # qualified names
        self.seen: dict[int, Any] = {}  # id(tensor) -> what the program sees for it
        self.kept: list[torch.Tensor] = []  # the captured tensors, alive for the trace (their ids are keys)
        self.attributes: dict[int, list[Place]] = {}  # id(tensor) -> the module attributes holding it
        self.before = [(m, dict(vars(m))) for _, m in self.modules]
        self.before_all = list(self.before)  # not yet put back
        for where, m in self.modules:
            for name, value in vars(m).items():
                for item, tensor in _tensor_items(value):
                    self.attributes.setdefault(id(tensor), []).append(Place("attribute", m, name, where, item))
        self.changes: list[tuple[torch.nn.Module, str, Any]] = []
        self.stop: Any = None
        self.indexed: set[int] = {id(m) for _, m in self.modules}  # modules whose tensors are places

    def __enter__(self) -> Capture:
        self.stop = sys._getframe(1)  # the tracer's frame: the program's frames are inside it
        return self

    def __exit__(self, *exc: Any) -> None:
        self._put_back()

    def _put_back(self) -> None:
        """Records the attributes of the submodules the program changed that held or now hold a
        tensor, and puts those back (once).

        NOTE: other attributes stay as tracing left them, as they did before tensors were captured:
        torch's own code caches state there on a first call (an FX GraphModule's code), which no
        call after it needs written again."""
        before_all, self.before_all = self.before_all, []
        for m, before in before_all:
            now = vars(m)
            for k in [k for k in {**before, **now} if now.get(k, NOT_SET) is not before.get(k, NOT_SET)]:
                old, new = before.get(k, NOT_SET), now.get(k, NOT_SET)
                if not (_holds_tensor(old) or _holds_tensor(new)):
                    continue
                self.changes.append((m, k, new))
                if old is NOT_SET:
                    del now[k]
                else:
                    now[k] = old

    def __call__(self, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
        """`(args, kwargs)` with every real tensor replaced by its input (`TraceContext.captured`),
        or None where one has no place (the caller refuses the op then)."""
        try:
            return map_tensors((args, kwargs), self.traced)
        except _NoPlace:
            return None

    def traced(self, tensor: torch.Tensor) -> Any:
        """What the program sees for `tensor`: its input, made on the first read; `_NoPlace` where
        no place holds it."""
        seen = self.seen.get(id(tensor))
        if seen is not None:
            return seen
        found = self._frame_places(tensor)  # NOTE: first: it notes the modules the frames reach
        places = self.attributes.get(id(tensor), []) + found
        if not places:
            raise _NoPlace
        at = len(self.prologue)
        with torch._C.DisableTorchFunction():  # NOTE: reading its metadata is no op of the program
            proxy, seen = self.element(tensor, places[0].input_name())
        self.prologue.insert(at, BoundSymbol(READ_CAPTURED, (tuple(places),), {}, proxy))
        self.seen[id(tensor)] = seen
        self.kept.append(tensor)
        return seen

    def _frame_places(self, tensor: torch.Tensor) -> list[Place]:
        """The globals and closure cells of the running program's frames that hold `tensor`.

        NOTE: a function the traced call itself made (a lambda, a generator expression inside
        forward) closes over that call's variables, which the next call makes again: its cells
        are no place."""
        frames = []
        frame = sys._getframe(1)
        while frame is not None and frame is not self.stop:
            if is_program_code(frame.f_code.co_filename):
                frames.append(frame)
            frame = frame.f_back
        places: list[Place] = []
        for frame in frames:
            code, globals_ = frame.f_code, frame.f_globals
            for name in code.co_names:
                held = globals_.get(name)
                if _isinstance(held, torch.nn.Module):
                    self._index(held, name)
                for item, value in _tensor_items(held):
                    if value is tensor and not any(p.holder is globals_ and p.name == name for p in places):
                        places.append(Place("global", globals_, name, globals_.get("__name__", "?"), item))
            if code.co_freevars and not any(code in f.f_code.co_consts for f in frames):
                for name in code.co_freevars:
                    if _isinstance(frame.f_locals.get(name), torch.nn.Module):
                        self._index(frame.f_locals[name], name)
                places += _cell_places(frame, tensor)
        return places

    def _index(self, module: torch.nn.Module, where: str) -> None:
        """Notes the tensors of `module`'s submodules, which a global or closure variable `where`
        holds (a jitted function calling a model it does not take as an argument), as places of
        them. NOTE: that the variable still holds this module is a free value's guard
        (free_values.py)."""
        if id(module) in self.indexed:
            return
        self.indexed.add(id(module))
        for qualified, m in module.named_modules():
            for name, value in vars(m).items():
                for item, tensor in _tensor_items(value):
                    place = Place("attribute", m, name, f"{where}.{qualified}" if qualified else where, item)
                    self.attributes.setdefault(id(tensor), []).append(place)

    def output(self, value: Any) -> Any:
        """The program's output with the real tensors it returns that have a place replaced by their
        inputs (they leave the computation as themselves)."""
        try:
            return map_tensors(value, self.traced)
        except _NoPlace:
            return value  # NOTE: the frontend refuses a real tensor in the output, naming it

    def writes(self) -> AttributeWrites:
        """The reassignments of submodule attributes the program made, to redo after each call."""
        self._put_back()
        writes, values = [], []
        before = {id(m): attributes for m, attributes in self.before}
        for m, name, value in self.changes:
            old = before[id(m)].get(name, NOT_SET)
            if value is not NOT_SET and old is not NOT_SET and value is self.seen.get(id(old)):
                continue  # NOTE: set to the very tensor it held (`.to` a device it is on): nothing changes
            if value is NOT_SET:
                writes.append((m, name, None, ()))
                continue
            leaves, spec = flatten(value)
            template = []
            for leaf in leaves:
                if _isinstance(leaf, torch.Tensor):
                    try:
                        leaf = self.traced(leaf)
                    except _NoPlace:
                        raise NotImplementedError(
                            f"the program set attribute {name} of {type(m).__name__} to a tensor it did not "
                            "compute and that no attribute, global or closure variable holds: not supported"
                        ) from None
                if _isinstance(leaf, (Proxy, ComplexProxy)):
                    values.append(leaf)
                    leaf = _FROM_OUTPUT
                template.append(leaf)
            writes.append((m, name, spec, tuple(template)))
        return AttributeWrites(tuple(writes), tuple(values))


def check_output(value: Any) -> None:
    """Refuses a real tensor in the program's output (`Capture.output` replaced those with a place)."""
    if _isinstance(value, (tuple, list)):
        for v in value:
            check_output(v)
    elif _isinstance(value, dict):
        for v in value.values():
            check_output(v)
    elif _isinstance(value, torch.Tensor):
        raise TracingError(
            "the jitted function returned a real torch.Tensor that it did not compute from its arguments and "
            "that no attribute of the jitted module, global or closure variable holds; return values must be "
            "computed from the arguments"
        )


def _holds_tensor(value: Any) -> bool:
    """Whether `value` is, or its containers hold, a tensor or a traced one."""
    if value is NOT_SET:
        return False
    leaves, _ = flatten(value)
    return any(_isinstance(leaf, (torch.Tensor, Proxy, ComplexProxy)) for leaf in leaves)


class _NoPlace(Exception):
    """A real tensor no place holds."""


def map_tensors(value: Any, fn: Callable[[torch.Tensor], Any]) -> Any:
    """`value` with each real tensor in its tuples, lists and dicts replaced by `fn(tensor)`."""
    if _isinstance(value, torch.Tensor):
        return fn(value)
    if type(value) in (tuple, list):
        return type(value)(map_tensors(v, fn) for v in value)
    if _isinstance(value, tuple) and hasattr(value, "_fields"):  # a named tuple
        return type(value)(*(map_tensors(v, fn) for v in value))
    if type(value) is dict:
        return {k: map_tensors(v, fn) for k, v in value.items()}
    return value


_LIBRARIES = tuple(
    os.path.join(directory, "")  # NOTE: with the separator, so torchvision's code is a program's
    for directory in (os.path.dirname(os.path.dirname(os.path.abspath(__file__))), os.path.dirname(torch.__file__))
)


@functools.cache
def is_program_code(filename: str) -> bool:
    """Whether code from `filename` is the program's, not the compiler's or torch's (whose globals
    and closures hold none of the program's tensors)."""
    return not os.path.abspath(filename).startswith(_LIBRARIES)


def _cell_places(frame: types.FrameType, tensor: torch.Tensor) -> list[Place]:
    """The closure cells holding `tensor` of the functions running `frame`'s code (each of its
    closures from the same code: which one runs the frame is not visible from it)."""
    local_values = frame.f_locals
    names = [n for n in frame.f_code.co_freevars if local_values.get(n) is tensor]
    if not names:
        return []
    places = []
    for fn in gc.get_referrers(frame.f_code):
        if type(fn) is not types.FunctionType or fn.__code__ is not frame.f_code or fn.__closure__ is None:
            continue
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            if name in names and cell.cell_contents is tensor:
                places.append(Place("cell", cell, name, fn.__qualname__))
    return places


class _Output:
    """In a write's template: the next of the computation's written values."""


_FROM_OUTPUT = _Output()


@dataclass(frozen=True)
class AttributeWrites:
    """What a traced call set on (or deleted from) the jitted module's submodules: per write
    `(module, attribute, spec or None to delete, template)`; `values`: the computation's extra
    outputs the templates' `_FROM_OUTPUT` leaves take, in order. When there are writes, the
    computation returns `(output, values)`."""

    writes: tuple = ()
    values: tuple[Proxy, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.writes)

    def output(self, output: Any) -> Any:
        """The computation's output tree: `(output, values)` when there are writes."""
        return (output, self.values) if self else output

    def around(self, computation: Callable) -> Callable:
        """`computation` (returning `(output, values)`) as a callable that sets the attributes
        after it and returns the output."""
        if not self:
            return computation
        writes = self.writes

        def setting_attributes(*inputs: Any) -> Any:
            output, values = computation(*inputs)
            computed = iter(values)
            for module, name, spec, template in writes:
                if spec is None:
                    vars(module).pop(name, None)
                    continue
                leaves = [next(computed) if leaf is _FROM_OUTPUT else leaf for leaf in template]
                vars(module)[name] = spec.rebuild(leaves)
            return output

        return setting_attributes
