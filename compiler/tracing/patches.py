"""What tracing changes in `torch` while a function runs on proxies: every torch function goes to the
ops table (`TracingMode`), `torch.arange`/`full`/`linspace` take symbolic numbers (`BYPASSES`), and
`torch.compiler.is_compiling()` is True (`compiling`). The changes to `torch` are shared by the
traces of every thread (`_SharedPatch`).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from compiler.core import proxies
from compiler.core.ir import NumberProxy, current, proxies_in


class TracingMode(TorchFunctionMode):
    """Routes every torch function called while tracing (factories included) to the ops table."""

    def __torch_function__(self, func: Callable, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        context = current()
        if context is not None:
            numbers = {id(p) for p in proxies_in((args, kwargs)) if isinstance(p, NumberProxy)}
            if numbers:
                context.drop_argument_parser_guards(sys._getframe(1), numbers)
        return proxies.HOOKS.dispatch(func, args, kwargs)


# torch functions whose argument parser takes a number argument only as a Python number (not
# through `__index__`, as it does for sizes): called with a NumberProxy while tracing, they go
# straight to the ops table (`torch.arange(n)` over a symbolic size n).
_NUMBER_PARAMETERS = ("arange", "full", "linspace")


def _number_parameters_bypass(name: str, original: Callable) -> Callable:
    def bypass(*args: Any, **kwargs: Any) -> Any:
        if current() is not None and any(isinstance(p, NumberProxy) for p in proxies_in((args, kwargs))):
            return proxies.HOOKS.dispatch(original, args, kwargs)
        return original(*args, **kwargs)

    bypass.__name__ = bypass.__qualname__ = name
    bypass.__wrapped__ = original
    return bypass


class _SharedPatch:
    """A change to `torch` that traces share: the first to enter makes it (`make` returns how to
    undo it), the last to leave undoes it, whatever the threads (and traces inside traces).

    Before, each trace saved what it found and put it back when it ended: a trace that ended while
    another thread traced undid the change under it (torch's own `arange` refused that trace's
    symbolic size), or put back the other's change for good (`torch.compiler.is_compiling()` stayed
    True after both had ended).
    """

    def __init__(self, make: Callable[[], Callable[[], None]]) -> None:
        self.make = make
        self.lock = threading.Lock()
        self.entered = 0
        self.undo: Callable[[], None] | None = None

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        """The change, made for the block."""
        with self.lock:
            if self.entered == 0:
                self.undo = self.make()
            self.entered += 1
        try:
            yield
        finally:
            with self.lock:
                self.entered -= 1
                if self.entered == 0 and self.undo is not None:
                    self.undo()
                    self.undo = None


def _install_bypasses() -> Callable[[], None]:
    """Installs the bypasses of `_NUMBER_PARAMETERS` on `torch`; returns how to remove them."""
    originals = {name: getattr(torch, name) for name in _NUMBER_PARAMETERS}
    for name, original in originals.items():
        setattr(torch, name, _number_parameters_bypass(name, original))

    def undo() -> None:
        for name, original in originals.items():
            setattr(torch, name, original)

    return undo


def _set_compiling_flag() -> Callable[[], None]:
    """Sets torch's "compiling" flag (see `compiling`); returns how to put it back."""
    previous = torch.compiler._is_compiling_flag
    torch.compiler._is_compiling_flag = True

    def undo() -> None:
        torch.compiler._is_compiling_flag = previous

    return undo


BYPASSES = _SharedPatch(_install_bypasses)
_COMPILING = _SharedPatch(_set_compiling_flag)


def compiling() -> contextlib.AbstractContextManager[None]:
    """`torch.compiler.is_compiling()` is True inside the block, as while torch.compile traces
    (shared by the traces of every thread: `_SharedPatch`).

    NOTE: torch reads the module global `torch.compiler._is_compiling_flag` (torch 2.11 to 2.13;
    2.13's `_compile_session_context` sets the same flag, 2.11 has no such helper).
    """
    return _COMPILING.applied()


_TracingMode = TracingMode  # NOTE: the name tests/compiler/ops/test_inplace_aliasing.py enters by
