"""Running eagerly what this compiler cannot compile: the records, the warning, the eager entry.

A *fallback* is one piece of a program that runs in eager PyTorch instead of through a compiled
trace because this compiler could not trace or compile it: an FX node the dynamo backend split
out of its graph (an op the compiler lacks), a dynamo graph break (a branch on a tensor value),
a graph or function that failed to compile as a whole, a frame dynamo could not trace at all.
Each one is recorded (`record`, into the process's log `compiler.core.fallback_log`, which a
fusion executor's regions that fell back to torch join; read back by `compiler.examine.fallbacks`)
and warned about with `UnsupportedFallback`, once per (what, source line) in a process.

`compiler.jit(fn, unsupported="eager")` and each piece of a split dynamo graph are
`EagerOnFailure` functions: a call that no compiled entry accepts and that fails to compile
runs `fn` eagerly, and so does every later call that no earlier entry accepts (an eager entry
that accepts any call is appended to the cache, so it is not traced again on every call).
"""

from __future__ import annotations

import functools
import linecache
import re
import warnings
from collections.abc import Callable
from typing import Any

from compiler.core.fallback_log import Fallback, log
from compiler.core.ir import Trace
from compiler.runtime.cache import CacheEntry, JittedFunction
from compiler.runtime.dispatch import install
from compiler.runtime.module import JittedModule
from compiler.tracing.structure import flatten

UNSUPPORTED_MODES = ("raise", "eager")


class UnsupportedFallback(UserWarning):
    """Part of a program runs eagerly because the fusebench compiler could not compile it."""


_WARNED: set[tuple[str, str]] = set()


def record(fallback: Fallback) -> None:
    """Logs `fallback` (`compiler.core.fallback_log`) and warns about it, once per (what, where) in this process."""
    log(fallback)
    key = (fallback.what, fallback.where)
    if key in _WARNED:
        return
    _WARNED.add(key)
    located = _LOCATION.match(fallback.where)
    if located is None:
        warnings.warn(f"fusebench: {fallback}", UnsupportedFallback, stacklevel=2)
    else:  # NOTE: shown at the user's line, as if the user's code had warned
        warnings.warn_explicit(f"fusebench: {fallback}", UnsupportedFallback, located[1], int(located[2]))


def one_line(error: BaseException, *, located: bool = True) -> str:
    """'TypeName: first line of the message' for a warning or record; with `located=False`, without
    the '(called at ...)' the compiler's errors add (when the record names its line otherwise)."""
    lines = str(error).strip().splitlines()
    text = lines[0] if lines else ""
    match = _CALLED_AT.search(text)
    if not located and match is not None:
        called_at = f"{match[0]}{linecache.getline(match[1], int(match[2])).strip()})"
        text = text.replace(" " + called_at, "").replace(called_at, "")
    return f"{type(error).__name__}: {text}"


def user_line(stack_trace: str | None) -> str:
    """'file.py:12: source line' of the innermost frame of an FX node's `meta['stack_trace']`
    (a formatted traceback), or '' when there is none."""
    found = ""
    lines = (stack_trace or "").splitlines()
    for i, line in enumerate(lines):
        match = _FRAME.match(line.strip())
        if match:
            following = lines[i + 1].strip() if i + 1 < len(lines) else ""
            source = "" if _FRAME.match(following) else following
            found = f"{match[1]}:{match[2]}: {source}"
    return found


_FRAME = re.compile(r'File "(.+)", line (\d+)')
_LOCATION = re.compile(r"(.+?):(\d+): ")
_CALLED_AT = re.compile(r"\(called at (.+?):(\d+): ")


class CompileFailure(Exception):
    """Compiling a cache entry failed (tracing, a pass, code generation): nothing ran yet, so the
    call can run another way. `error` is what the compiler raised."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(one_line(error))
        self.error = error


def failing_as_compile_failure(compile_entry: Callable[..., CacheEntry]) -> Callable[..., CacheEntry]:
    """`compile_entry` whose exceptions are `CompileFailure`s (so a caller tells them from the
    errors of running the compiled code)."""

    @functools.wraps(compile_entry)
    def compile_or_fail(*args: Any, **kwargs: Any) -> CacheEntry:
        try:
            return compile_entry(*args, **kwargs)
        except CompileFailure:
            raise
        except Exception as error:
            raise CompileFailure(error) from error

    return compile_or_fail


class EagerOnFailure:
    """A jitted function whose calls that fail to compile run eagerly (see the module docstring).
    Mixed into `JittedFunction` and `JittedModule`; built with `failing_as_compile_failure`."""

    fallback_kind = "function"

    def _miss(self, args: tuple, kwargs: dict) -> Any:
        try:
            return super()._miss(args, kwargs)  # type: ignore[misc]
        except CompileFailure as failure:
            return self._run_eagerly_from_now_on(failure.error, args, kwargs)

    def _run_eagerly_from_now_on(self, error: BaseException, args: tuple, kwargs: dict) -> Any:
        fallback = Fallback(
            f"the whole of {self._name()}", _error_line(error), one_line(error, located=False), self.fallback_kind
        )
        record(fallback)
        self.fallbacks = [fallback]
        entry = CacheEntry(
            prologue=lambda args, kwargs: (args, kwargs),
            computation=self._eager,
            prologue_trace=Trace((), [], (), name="prologue"),
            traces=[],
            compile_seconds=0.0,
        )
        self.entries.append(entry)  # type: ignore[attr-defined]
        install(self.func, self.entries, self)  # type: ignore[attr-defined]
        self.last_entry = entry
        self.eager_error = error
        return self._eager(args, kwargs)

    def _eager(self, args: tuple, kwargs: dict) -> Any:
        return self.fn(*args, **kwargs)  # type: ignore[attr-defined]

    def _name(self) -> str:
        return getattr(self.fn, "__qualname__", repr(self.fn))  # type: ignore[attr-defined]


def _error_line(error: BaseException) -> str:
    """The user's line an error of this compiler names ('(called at file.py:12: line)'), or ''."""
    match = _CALLED_AT.search(str(error))
    if match is None:
        return ""
    return f"{match[1]}:{match[2]}: {linecache.getline(match[1], int(match[2])).strip()}"


class EagerOnFailureFunction(EagerOnFailure, JittedFunction):
    """`compiler.jit(fn, unsupported="eager")` of a function."""


class EagerOnFailureModule(EagerOnFailure, JittedModule):
    """`compiler.jit(module, unsupported="eager")`, and each piece of a split dynamo graph."""

    def _eager(self, args: tuple, kwargs: dict) -> Any:
        # NOTE: the cache's arguments are (state, modes, *module arguments); the module itself
        # runs with its own tensors (hooks included), its output flattened as a traced one is.
        leaves, spec = flatten(self.module(*args[2:], **kwargs))
        return spec, leaves

    def _name(self) -> str:
        return f"{type(self.module).__name__}.forward"
