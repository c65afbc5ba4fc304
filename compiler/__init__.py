"""fusebench's trace compiler.

jfn = compiler.jit(fn, cache="symbolic")
jfn(*args)                       # traces, compiles, runs; later calls reuse cache entries
compiler.last_traces(jfn)        # the computation trace after each pass
compiler.last_prologue(jfn)      # the guards of the entry used last
compiler.cache_stats(jfn)        # hits, misses (compilations), compile seconds
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from compiler.cache import CacheStats, JittedFunction
from compiler.errors import GuardFailure, TracingError
from compiler.ir import Trace
from compiler.pipeline import compile_entry, make_options

__all__ = [
    "CacheStats",
    "GuardFailure",
    "JittedFunction",
    "Trace",
    "TracingError",
    "cache_stats",
    "jit",
    "last_prologue",
    "last_traces",
]


def jit(fn: Callable, *, cache: str = "constant", executors: Sequence[str] | None = None) -> JittedFunction:
    """Compiles `fn` on first call (and whenever no cache entry's guards accept the arguments).

    cache: "constant" bakes numbers and shapes into each entry; "symbolic" keeps int/float/bool
        arguments as symbolic inputs and guards only the branches taken on them.
    executors: executor names in priority order (torch is always the fallback).
    """
    options = make_options(cache, executors)
    return JittedFunction(fn, functools.partial(compile_entry, fn, options))


def _entry(jfn: Any) -> Any:
    if not isinstance(jfn, JittedFunction):
        raise TypeError(f"expected a function returned by compiler.jit, got {type(jfn).__name__}")
    if jfn.last_entry is None:
        raise RuntimeError(f"{jfn!r} has not been called yet, so it has no traces")
    return jfn.last_entry


def last_traces(jfn: JittedFunction) -> list[Trace]:
    """The computation trace after tracing and after each pass, for the entry the last call used."""
    return list(_entry(jfn).traces)


def last_prologue(jfn: JittedFunction) -> Trace:
    """The prologue (unpacking and guards) of the entry the last call used."""
    return _entry(jfn).prologue_trace


def cache_stats(jfn: JittedFunction) -> CacheStats:
    """Hits, misses (= compilations), and seconds spent compiling."""
    if not isinstance(jfn, JittedFunction):
        raise TypeError(f"expected a function returned by compiler.jit, got {type(jfn).__name__}")
    return jfn.stats
