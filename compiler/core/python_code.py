"""Generated Python source compiled once per text.

The compiler writes Python for every trace, prologue and dispatcher it makes; the same text comes
back whenever a program is compiled again for inputs it has seen the like of (another module of
the same structure, a fresh `jit` of the same function, a dispatcher rewritten with the same
entries). Compiling source costs about half a millisecond per trace; a code object is immutable
and runs under any globals, so one per text serves every function made from it."""

from __future__ import annotations

import functools
import types

CACHED_SOURCES = 1024


@functools.lru_cache(maxsize=CACHED_SOURCES)
def code_for(source: str, filename: str) -> types.CodeType:
    """The code object of `source` (a module's text, compiled for `exec`), named `filename` in
    tracebacks; the same object for the same text and name."""
    return compile(source, filename, "exec", dont_inherit=True)
