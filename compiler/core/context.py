"""The tracing context: fresh proxy names, and the scopes bound symbols are recorded into.

One context is current per thread while a function is traced (or while a pass builds new bound
symbols); proxies take their names from it and prims record into its innermost scope.
"""

from __future__ import annotations

import contextlib
import enum
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any

import torch


class TraceContext:
    """Hands out fresh proxy names and collects the bound symbols recorded while it is current.

    Bound symbols (`compiler.core.ir.BoundSymbol`, defined above this module) are typed `Any` here.
    `producers` maps `id(proxy)` to the prim that defined it (ops are skipped: their outputs map
    to the prim inside them); the tracer follows it to find what a tensor is a view of.
    """

    def __init__(self, reserved: set[str] | frozenset[str] = frozenset()) -> None:
        self._names: set[str] = set(reserved)
        self._counters: dict[str, int] = {}
        self._scopes: list[list[Any]] = [[]]
        self.producers: dict[int, Any] = {}
        # NOTE: values made while the program turns grad off (`with torch.no_grad():`) carry no
        # gradient; that matters only where tracing began with grad on.
        self.grad_at_start: bool = torch.is_grad_enabled()
        # id of a guard recorded by a NumberProxy's `__index__` -> (the caller's frame, its instruction)
        self._index_guards: dict[int, tuple[Any, int]] = {}
        # (args, kwargs) -> the same with the real tensors the program read from its attributes,
        # globals or closures replaced by their traced inputs, or None (tracing/captured_tensors.py)
        self.captured: Any = None
        # called at each op the program calls: notes its running frames (tracing/free_values.py)
        self.seen_op: Callable[[], None] | None = None

    @property
    def bsyms(self) -> list[Any]:
        """The top-level bound symbols recorded so far."""
        return self._scopes[0]

    def fresh(self, prefix: str) -> str:
        """A name `prefix<k>` not used before in this context."""
        while True:
            k = self._counters.get(prefix, 0)
            self._counters[prefix] = k + 1
            name = f"{prefix}{k}"
            if name not in self._names:
                self._names.add(name)
                return name

    def claim(self, name: str) -> str:
        """`name` itself if it is free and a valid identifier, otherwise a fresh variant of it."""
        if name.isidentifier() and name not in self._names and name not in _RESERVED_WORDS:
            self._names.add(name)
            return name
        base = name if name.isidentifier() else "a"
        return self.fresh(base + "_")

    def record(self, bsym: Any) -> None:
        """Appends `bsym` to the innermost open scope."""
        self._scopes[-1].append(bsym)
        if isinstance(bsym.sym, enum.Enum):  # a Prim (ops are Symbols: their prims are recorded too)
            for p in bsym.outputs:
                self.producers.setdefault(id(p), bsym)

    def note_index_guard(self, frame: types.FrameType) -> None:
        """Marks the guard just recorded as asked for by `__index__`, called from `frame`."""
        self._index_guards[id(self._scopes[-1][-1])] = (frame, frame.f_lasti)

    def drop_argument_parser_guards(self, frame: types.FrameType, proxies: set[int]) -> None:
        """Drops the guards that `__index__` recorded at `frame`'s current instruction (a call of a
        torch function) on the proxies (ids) it passes: torch's argument parser converts an int
        argument with `__index__` before it hands the call, with the proxies themselves, to the
        tracing mode, so the value it asked for is not a condition of the program."""
        scope = self._scopes[-1]
        while scope:
            where = self._index_guards.get(id(scope[-1]))
            if where is None or where[0] is not frame or where[1] != frame.f_lasti:
                return
            if id(scope[-1].args[0]) not in proxies:
                return
            del self._index_guards[id(scope.pop())]

    @contextlib.contextmanager
    def scope(self) -> Iterator[list[Any]]:
        """Collects the bound symbols recorded inside the block into the yielded list."""
        collected: list[Any] = []
        self._scopes.append(collected)
        try:
            yield collected
        finally:
            self._scopes.pop()


_RESERVED_WORDS = frozenset({"torch", "prims", "math", "inf", "nan"})
_local = threading.local()


def current() -> TraceContext | None:
    """The context being traced into on this thread, or None outside tracing."""
    return getattr(_local, "context", None)


@contextlib.contextmanager
def tracing(context: TraceContext) -> Iterator[TraceContext]:
    """Makes `context` current for the block (contexts nest)."""
    previous = current()
    _local.context = context
    try:
        yield context
    finally:
        _local.context = previous


def fresh_name(prefix: str) -> str:
    """A fresh name from the current context (or a private one outside tracing)."""
    context = current()
    if context is None:
        context = _scratch
    return context.fresh(prefix)


_scratch = TraceContext()
