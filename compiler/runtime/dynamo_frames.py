"""Frames dynamo gives up on: with backend "fusebench", each is a counted fallback.

When dynamo cannot trace a frame at all (it cannot resume after a graph break there, or the traced
code raises, as LongT5's local attention indexes a mask transformers builds only in eager), it
runs the frame's own code eagerly, the functions it calls traced on their own; the backend is
never called for that frame. Dynamo runs its compile-end callbacks while the failure propagates
(`torch._dynamo.callback_handler`), so the callback here sees it: where the frame compiled for
this backend, it is recorded as a `Fallback` of kind 'frame' (warned once, counted by
`compiler.examine.fallbacks` and the harness's `track_fallbacks`).

NOTE: `torch._dynamo.reset()` drops every callback; `watch` registers it again (the backend calls
it on each graph it compiles and when dynamo's registry loads; the harness after its reset).
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from compiler.runtime.fallbacks import Fallback, one_line, record

_WATCHED: set[str] = set()  # the backends (by registered name) whose skipped frames are recorded


class _Handling(threading.local):
    """The exception being handled where dynamo started compiling (a frame compiled inside an
    `except` block sees that one in `sys.exc_info()` when it ends, failed or not)."""

    error: BaseException | None = None


_AT_START = _Handling()


def watch(backend_name: str) -> None:
    """Records, from now on, each frame dynamo skips for the backend registered as `backend_name`
    (idempotent)."""
    from torch._dynamo.callback import callback_handler

    _WATCHED.add(backend_name)
    if _frame_started not in callback_handler.start_callbacks:
        callback_handler.register_start_callback(_frame_started)
    if _frame_ended not in callback_handler.end_callbacks:
        callback_handler.register_end_callback(_frame_ended)


def _frame_started(args: Any) -> None:
    _AT_START.error = sys.exc_info()[1]


def _frame_ended(args: Any) -> None:
    """Dynamo's compile-end callback: records the frame as a fallback when its compilation failed."""
    from torch._dynamo.exc import SkipFrame

    error = sys.exc_info()[1]
    # NOTE: SkipFrame is dynamo deciding a frame holds nothing to compile, not a failure
    if error is None or error is _AT_START.error or isinstance(error, SkipFrame) or _backend_name() not in _WATCHED:
        return
    code = _frame_code()
    what = f"the whole frame {code.co_name}" if code is not None else "a whole frame"
    record(Fallback(what, _failing_line(error), one_line(error)[:300], "frame"))


def _compile_frame() -> Any:
    """The frame of dynamo's `_compile` that is failing (its locals name the code and the backend)."""
    frame = sys._getframe(2)
    while frame is not None and not (frame.f_code.co_name == "_compile" and "compiler_fn" in frame.f_locals):
        frame = frame.f_back
    return frame


def _backend_name() -> str | None:
    """The backend's name as dynamo registered it (its `WrapBackendDebug` names it)."""
    frame = _compile_frame()
    backend = frame.f_locals["compiler_fn"] if frame is not None else None
    return getattr(backend, "__name__", None)


def _frame_code() -> Any:
    frame = _compile_frame()
    return frame.f_locals.get("code") if frame is not None else None


def _failing_line(error: BaseException) -> str:
    """'file.py:12: source line' where dynamo stopped in the user's code, or ''."""
    stack = getattr(error, "real_stack", None)
    if not stack:
        return ""
    last = stack[-1]
    return f"{last.filename}:{last.lineno}: {(last.line or '').strip()}"
