"""Output structures: a value tree split into its leaves and a spec that rebuilds it.

A model returns its own containers: dicts and their subclasses (`OrderedDict`), dataclasses
(Hugging Face's `ModelOutput` is both), named tuples and structseqs, lists and tuples, and
objects the program built that hold tensors in their attributes (a Hugging Face `DynamicCache`
and its layers). Traces only carry plain tuples, lists and dicts of proxies, so a jitted module
returns `(spec, leaves)` and the caller calls `spec.rebuild(leaves)`. Anything else is a leaf
(proxies, tensors, numbers, None, objects without proxies), and so is the stand-in of an object
the call was given (tracing/objects.py): the caller gets its own object back, as from eager.

NOTE: an object is rebuilt as a new instance of its class (`__new__`, no `__init__`) whose
attributes are its traced ones: the proxies' values, and a deep copy per call of the rest (a
flag, a device), so callers that mutate what they get back (a cache grown by the next decode
step) never change what the next call returns.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import threading
from dataclasses import dataclass
from typing import Any

import torch

from compiler.core.ir import Proxy
from compiler.core.proxies import rebuild_tuple


@dataclass(frozen=True)
class Spec:
    """How to rebuild one container: its type, its keys (dicts, dataclasses) and its children."""

    kind: str  # "leaf", "tuple", "list", "dict", "dataclass", "object"
    type: Any = None
    keys: tuple = ()
    children: tuple[Spec, ...] = ()
    constants: tuple = ()  # an object's attributes without proxies: (name, value) pairs

    def rebuild(self, leaves: list) -> Any:
        """The value with this structure whose leaves are `leaves`, in flattening order."""
        return self._rebuild(leaves, 0)[0]

    def _rebuild(self, leaves: list, at: int) -> tuple[Any, int]:
        if self.kind == "leaf":
            return leaves[at], at + 1
        items = []
        for child in self.children:
            item, at = child._rebuild(leaves, at)
            items.append(item)
        if self.kind == "tuple":
            return rebuild_tuple(self.type, items), at
        if self.kind == "list":
            return items, at
        if self.kind == "dict":
            pairs = dict(zip(self.keys, items))
            return (pairs if self.type is dict else self.type(pairs)), at
        if self.kind == "dataclass":
            return self.type(**dict(zip(self.keys, items))), at
        rebuilt = object.__new__(self.type)
        attributes = dict(self.constants)  # in the object's order, traced ones as _Traced
        if not self.atomic_constants:
            attributes = copy.deepcopy(attributes)
        attributes.update(zip(self.keys, items))
        rebuilt.__dict__.update(attributes)
        return rebuilt, at

    @functools.cached_property
    def atomic_constants(self) -> bool:
        """Whether every constant attribute is a value no caller can mutate (numbers, strings,
        None, dtypes, devices, and tuples of them), so rebuilding needs no deep copy."""
        return all(_atomic(value) for _, value in self.constants)

    def __repr__(self) -> str:
        return f"Spec({getattr(self.type, '__name__', self.kind)})"


_ATOMS = (int, float, complex, bool, str, bytes, type(None), torch.dtype, torch.device, type)


def _atomic(value: Any) -> bool:
    if isinstance(value, tuple):
        return all(_atomic(item) for item in value)
    return type(value) in _ATOMS or isinstance(value, type)


_LEAF = Spec("leaf")


class _LiveStandIns:
    """The stand-ins of the traces in progress, in every thread (tracing/objects.py): objects a
    traced call was given, which an output keeps as leaves (the caller gets its own object back)."""

    def __init__(self) -> None:
        self._ids: set[int] = set()
        self._lock = threading.Lock()

    def add(self, stand_in: Any) -> None:
        with self._lock:
            self._ids.add(id(stand_in))

    def discard(self, stand_in: Any) -> None:
        with self._lock:
            self._ids.discard(id(stand_in))

    def __contains__(self, value: Any) -> bool:
        return id(value) in self._ids


STAND_INS = _LiveStandIns()


class _Traced:
    """Marks, among an object's constant attributes, the place of a traced one."""


def flatten(value: Any) -> tuple[list, Spec]:
    """(the leaves of `value`, in order, and the spec that rebuilds it from them)."""
    leaves: list = []
    return leaves, _flatten(value, leaves)


def _flatten(value: Any, leaves: list) -> Spec:
    if value in STAND_INS:
        leaves.append(value)
        return _LEAF
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = tuple(f.name for f in dataclasses.fields(value) if f.init)
        children = tuple(_flatten(getattr(value, n), leaves) for n in names)
        return Spec("dataclass", type(value), names, children)
    if isinstance(value, dict):
        children = tuple(_flatten(v, leaves) for v in value.values())
        return Spec("dict", type(value), tuple(value), children)
    if isinstance(value, tuple):
        return Spec("tuple", type(value), (), tuple(_flatten(v, leaves) for v in value))
    if isinstance(value, list):
        return Spec("list", list, (), tuple(_flatten(v, leaves) for v in value))
    attributes = getattr(value, "__dict__", None)
    # NOTE: a module is returned as itself (its parameters hold proxies only while it is traced)
    rebuilt = not isinstance(value, (type, torch.nn.Module)) and isinstance(attributes, dict)
    if rebuilt and _holds_proxy(attributes):
        traced = {k: v for k, v in attributes.items() if _holds_proxy(v)}
        constants = tuple((k, _Traced if k in traced else v) for k, v in attributes.items())
        children = tuple(_flatten(v, leaves) for v in traced.values())
        return Spec("object", type(value), tuple(traced), children, constants)
    leaves.append(value)
    return _LEAF


def _holds_proxy(value: Any, seen: set[int] | None = None) -> bool:
    """Whether a proxy is inside `value` (containers and objects' attributes, searched once each)."""
    if isinstance(value, Proxy):
        return True
    seen = set() if seen is None else seen
    if id(value) in seen:
        return False
    seen.add(id(value))
    if isinstance(value, dict):
        return any(_holds_proxy(v, seen) for v in value.values())
    if isinstance(value, (tuple, list)):
        return any(_holds_proxy(v, seen) for v in value)
    attributes = getattr(value, "__dict__", None)
    if isinstance(value, type) or not isinstance(attributes, dict) or isinstance(value, torch.nn.Module):
        return False
    return any(_holds_proxy(v, seen) for v in attributes.values())
