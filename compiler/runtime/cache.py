"""The cache: a jitted function's entries, how a call finds one, and hit/miss/compile-time stats.

An entry is (prologue, computation). A call runs the entries' prologues in order until one
accepts the arguments (returns the computation's inputs instead of raising `GuardFailure`) and
runs that entry's computation; when none accepts, the function is traced and compiled again
(a miss, i.e. a recompilation) and the new entry is appended.

The order the entries are tried in is most recently used first: a new entry goes first (the calls
after a miss are usually laid out as the one that missed), and an entry that accepts `PROMOTE_AFTER`
calls in a row after another entry's guards failed moves to the front (the dispatcher is generated
again; calls that alternate between entries never trigger it). Any entry whose guards accept a
call computes it correctly, so the order only decides how many guards a call runs before its
entry's: the fast path is the first entry's guards accepting (`CacheStats.fast_hits`). Entries
that this class did not compile itself (an eager fallback that accepts every call) keep the
order they were added in. A recompilation records why each
entry rejected the call (`recompilations`), and with `automatic_dynamic` the numbers whose
baked-in values were rejected become symbolic in every later entry (runtime/auto_dynamic.py).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from compiler.core.errors import GuardFailure, check, short_repr
from compiler.core.ir import Trace
from compiler.runtime.auto_dynamic import Recompilation, check_requested, explain_all, to_make_symbolic
from compiler.runtime.dispatch import INLINED, dispatcher, install

PROMOTE_AFTER = 4  # calls in a row accepted by the same entry, tried after another, that move it to the front


@dataclass
class CacheEntry:
    """One compiled specialisation of a function."""

    prologue: Callable[[tuple, dict], tuple]
    computation: Callable[..., Any]
    prologue_trace: Trace
    traces: list[Trace]
    compile_seconds: float
    backward: Callable[[], list[Trace]] | None = None  # gives backward_traces (autograd entries)
    backward_ran: Callable[[], bool] = lambda: False  # whether a backward() has run the entry's backward
    saved: tuple = ()  # the proxies its forward saves for the backward

    @property
    def backward_traces(self) -> list[Trace]:
        """The backward the entry's last `backward()` ran (compiled for the cotangents present),
        after its construction and after each pass; before any `backward()`, the one for every
        output's cotangent (its passes run here, on first need); [] when the entry does not run
        under autograd."""
        return self.backward() if self.backward is not None else []


@dataclass
class CacheStats:
    """Counters of a jitted function: `misses` counts compilations (the first one included)."""

    hits: int = 0
    misses: int = 0
    compile_seconds: list[float] = field(default_factory=list)
    later_hits: int = 0  # hits by an entry tried after another entry's guards failed

    @property
    def fast_hits(self) -> int:
        """Hits by the entry tried first (the newest, or the one the latest calls used): its guards
        alone ran."""
        return self.hits - self.later_hits

    @property
    def total_compile_seconds(self) -> float:
        """Seconds spent tracing and compiling, over all misses."""
        return sum(self.compile_seconds)

    @property
    def recompilations(self) -> int:
        """Compilations after the first one."""
        return max(self.misses - 1, 0)


class JittedFunction(functools.partial):
    """A callable with the wrapped function's signature that runs cached compiled traces.

    It is a `functools.partial` of its dispatcher (runtime/dispatch.py): a call goes from C
    straight into the generated lookup of the cache entries.
    """

    def __new__(cls, fn: Callable, *args: Any, **kwargs: Any) -> JittedFunction:
        """A partial of a new dispatcher that misses until the first entry is compiled."""
        self = super().__new__(cls, dispatcher(lambda args, kwargs: self._beyond_inlined(args, kwargs)))
        return self

    def __init__(
        self,
        fn: Callable,
        compile_entry: Callable[[tuple, dict, frozenset[str]], CacheEntry],
        *,
        automatic_dynamic: bool = False,
        dynamic: frozenset[str] = frozenset(),
    ) -> None:
        """`compile_entry(args, kwargs, dynamic)` traces and compiles with the numbers and sizes
        named in `dynamic` symbolic; `dynamic` starts as given (`jit(dynamic=...)`, checked against
        the inputs at the first compilation) and `automatic_dynamic` grows it from the guards that
        failed."""
        functools.update_wrapper(self, fn)
        self.fn = fn
        self._compile_entry = compile_entry
        self.entries: list[CacheEntry] = []  # in compilation order
        self.order: list[CacheEntry] = []  # the order the dispatcher tries them in (see the module)
        self.stats = CacheStats()
        self.last_entry: CacheEntry | None = None
        self._streak = 0  # calls in a row that `last_entry` accepted after another entry's guards failed
        self.automatic_dynamic = automatic_dynamic
        self.dynamic: frozenset[str] = frozenset(dynamic)
        self.requested: frozenset[str] = self.dynamic  # what jit was given; the rest automatic dynamic chose
        self.kept_constant: frozenset[str] = frozenset()  # names that could not be traced symbolic
        self.recompilations: list[Recompilation] = []

    def _beyond_inlined(self, args: tuple, kwargs: dict) -> Any:
        """The entries the dispatcher does not inline, tried in order; a miss when none accepts."""
        # NOTE: an entry added by a subclass (an eager fallback) is installed in compilation order
        tried = self.order if len(self.order) == len(self.entries) else self.entries
        for entry in tried[INLINED:]:
            try:
                inputs = entry.prologue(args, kwargs)
            except GuardFailure:
                continue
            self.stats.hits += 1
            self.later_hit(entry)
            return entry.computation(*inputs)
        return self._miss(args, kwargs)

    def later_hit(self, entry: CacheEntry) -> None:
        """Records a hit by `entry` after other entries' guards failed; at the `PROMOTE_AFTER`th
        such call in a row, `entry` becomes the first entry tried."""
        self.stats.later_hits += 1
        self._streak = self._streak + 1 if entry is self.last_entry else 1
        self.last_entry = entry
        if self._streak >= PROMOTE_AFTER and len(self.order) == len(self.entries) and entry in self.order:
            self._streak = 0
            self.order.remove(entry)
            self.order.insert(0, entry)
            install(self.func, self.order, self)

    def _miss(self, args: tuple, kwargs: dict) -> Any:
        start = time.perf_counter()
        symbolic: set[str] = set()
        if self.entries:
            misses = explain_all([e.prologue_trace for e in self.entries], args, kwargs)
            symbolic = to_make_symbolic(misses) - self.dynamic - self.kept_constant if self.automatic_dynamic else set()
            call = self.stats.hits + self.stats.misses + 1
            self.recompilations.append(Recompilation(call, misses, tuple(sorted(symbolic))))
        try:
            entry = self._compile_entry(args, kwargs, self.dynamic | symbolic)
            self.dynamic |= symbolic
        except Exception:
            # NOTE: an earlier entry may have made a size symbolic where this call's tracing needs
            # it known (a layout question: is_contiguous); every automatic choice is undone then.
            automatic = (self.dynamic - self.requested) | symbolic
            if not automatic:
                raise
            # NOTE: the function cannot be traced with these numbers or sizes symbolic: they stay
            # constant, and later misses on them do not try again.
            self.recompilations[-1].made_symbolic = ()
            self.kept_constant |= automatic
            self.dynamic -= automatic
            entry = self._compile_entry(args, kwargs, self.dynamic)
        entry.compile_seconds = time.perf_counter() - start
        if not self.entries and self.dynamic:  # before a first entry, `dynamic` is what jit was given
            check_requested(self.dynamic, entry.prologue_trace, getattr(self.fn, "__qualname__", repr(self.fn)))
        self.entries.append(entry)
        self.order.insert(0, entry)
        install(self.func, self.order, self)
        self.stats.misses += 1
        self.stats.compile_seconds.append(entry.compile_seconds)
        self.last_entry = entry
        return entry.computation(*entry.prologue(args, kwargs))

    def __repr__(self) -> str:
        return f"<jitted {getattr(self.fn, '__qualname__', self.fn)}: {len(self.entries)} cache entries>"


def jitted(value: Any, api: str) -> JittedFunction:
    """`value` when it is a jitted function, else a TypeError naming `api` (e.g. 'last_traces') and the value."""
    check(
        isinstance(value, JittedFunction),
        lambda: (
            f"{api}({short_repr(value)}): expected a function returned by compiler.jit, got "
            f"{type(value).__name__}"
            + (f"; jit it first: compiler.jit({getattr(value, '__name__', 'fn')})" if callable(value) else "")
        ),
        TypeError,
    )
    return value


def called_jitted(value: Any, api: str) -> CacheEntry:
    """The entry the last call of jitted function `value` used; errors name `api` when there is none."""
    entry = jitted(value, api).last_entry
    check(
        entry is not None,
        lambda: f"{api}({short_repr(value)}): it has not been called yet; call it once first",
        RuntimeError,
    )
    return entry
