"""Settings: the plain Python values a module's forward reads (`self.scale`, `self.config.use_cache`).

A trace bakes such values in as constants, so a jitted module whose attribute changed after a call
(`model.scale = 3.0`, a dropout's `p`, a config flag) would keep computing with the old one.
While a module is traced, `recording_reads` notes which attributes of its submodules, and of
the configuration objects they hold (transformers' `config`: anything with a `to_dict`), the
forward read whose values are numbers, strings, flags or None (`training` aside, a mode of its
own). `Settings` then reads those values before each call with C-level maps, and says when one
changed since the last call: the caller compiles again (runtime/module.py). Only what a trace
read is watched, so attributes the forward never reads (a training loop's counters stored on the
model) never cost a compilation.

Recording swaps each object's class for a subclass that notes attribute reads, for the trace
only; an object whose class cannot be swapped (a C-level class, `__slots__`) is watched whole:
every plain value in its `__dict__`.
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Iterable, Iterator
from typing import Any

import torch
from torch import nn

PLAIN = (bool, int, float, str, type(None))
_recording: set[tuple[int, str]] | None = None  # (object id, attribute) read while recording
_recording_classes: dict[type, type] = {}


def is_config(value: Any) -> bool:
    """Whether `value` is a configuration object a module keeps (has `to_dict` and a `__dict__`)."""
    return (
        hasattr(type(value), "to_dict")
        and hasattr(value, "__dict__")
        and not isinstance(value, (nn.Module, torch.Tensor, type))
    )


def watched_objects(modules: Iterable[nn.Module]) -> list[Any]:
    """The modules and the configuration objects they hold, each once."""
    found: dict[int, Any] = {}
    for m in modules:
        found.setdefault(id(m), m)
        for value in vars(m).values():
            if is_config(value):
                found.setdefault(id(value), value)
    return list(found.values())


def _recording_class(cls: type) -> type:
    sub = _recording_classes.get(cls)
    if sub is None:
        base = cls.__getattribute__

        def __getattribute__(self: Any, name: str) -> Any:
            value = base(self, name)
            if _recording is not None and type(value) in PLAIN:
                _recording.add((id(self), name))
            return value

        namespace = {"__getattribute__": __getattribute__, "__module__": cls.__module__}
        sub = _recording_classes[cls] = type(cls.__name__, (cls,), namespace | {"__qualname__": cls.__qualname__})
    return sub


@contextlib.contextmanager
def recording_reads(objects: list[Any]) -> Iterator[dict[int, set[str] | None]]:
    """Records the plain attributes of `objects` read inside; yields {id: names read, or None
    for an object watched whole}, filled when the block ends."""
    global _recording
    reads: dict[int, set[str] | None] = {}
    swapped = []
    for obj in objects:
        cls = type(obj)
        try:
            obj.__class__ = _recording_class(cls)
            swapped.append((obj, cls))
            reads[id(obj)] = set()
        except TypeError:
            reads[id(obj)] = None
    outer, _recording = _recording, set()
    try:
        yield reads
    finally:
        seen, _recording = _recording, outer
        for obj, cls in swapped:
            obj.__class__ = cls
        for key, name in seen:
            if reads.get(key) is not None:
                reads[key].add(name)


class Settings:
    """The watched plain values of some objects: `changed()` says whether any differs from the
    last call's (or a watched attribute is gone)."""

    def __init__(self) -> None:
        self.dicts: list[dict] = []
        self.getters: list[operator.itemgetter] = []
        self.names: list[tuple[str, ...]] = []
        self.last: tuple | None = None

    def watch(self, objects: list[Any], reads: dict[int, set[str] | None]) -> None:
        """Adds what a trace read (`recording_reads`) to the watched values."""
        known = {(id(d), names) for d, names in zip(self.dicts, self.names)}
        for obj in objects:
            table = vars(obj)
            read = reads.get(id(obj))
            plain = [k for k, v in table.items() if type(v) in PLAIN and k != "training"]
            names = tuple(sorted(k for k in plain if read is None or k in read))
            if names and (id(table), names) not in known:
                self.dicts.append(table)
                self.names.append(names)
                self.getters.append(operator.itemgetter(*names))
        self.last = self._values()

    def _values(self) -> tuple | None:
        try:
            return tuple(map(operator.call, self.getters, self.dicts))
        except KeyError:
            return None

    def changed(self) -> bool:
        """Whether a watched value changed since the last call (which this call now becomes)."""
        if not self.getters:
            return False
        values = self._values()
        try:
            if values is not None and values == self.last:
                return False
        except RuntimeError:  # NOTE: a watched attribute now holds a tensor
            pass
        self.last = values
        return True
