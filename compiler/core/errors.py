"""Errors raised by the compiler, the one `check` helper, and locating the user's line of code."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

_COMPILER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # compiler/, above core/


class GuardFailure(Exception):
    """A prologue guard rejected the arguments: the cache entry does not apply to this call."""


class TracingError(RuntimeError):
    """The function cannot be traced as written (for example, control flow on tensor values)."""


class OpValueError(ValueError, RuntimeError):
    """A traced op's argument check failed (shapes that do not match, a bad size): a ValueError, and
    a RuntimeError as eager raises for the same call, so a program catching eager's error still does."""


class OpTypeError(TypeError, RuntimeError):
    """A traced op's dtype or argument-kind check failed: a TypeError, and a RuntimeError as eager
    raises for the same call (`expected scalar type Float but found Double`)."""


_AS_OP_ERROR: dict[type, type[Exception]] = {ValueError: OpValueError, TypeError: OpTypeError}


def as_op_error(error: Exception) -> Exception:
    """`error` (a plain ValueError or TypeError an op's decomposition raised while tracing) as the
    matching `OpValueError` / `OpTypeError`, with its message, cause and traceback; any other
    error as it is."""
    kind = _AS_OP_ERROR.get(type(error))
    if kind is None:
        return error
    converted = kind(*error.args).with_traceback(error.__traceback__)
    converted.__cause__ = error.__cause__
    return converted


# NOTE: still AttributeErrors: `hasattr(x, "grad")` and `getattr(x, "grad", None)` behave as before
ATTRIBUTE_HINTS = {
    "grad": ": gradients are not traced values; pass them to the function as arguments (an optimizer "
    "step over `params` and `grads` lists)",
    "grad_fn": ": the trace records no autograd graph; compiled functions are differentiated as a whole",
}


def missing_attribute(name: str, tensor: str, tensor_attribute: bool) -> str:
    """The message for reading attribute `name` of the traced tensor `tensor`: for a torch.Tensor
    attribute the trace does not model (`tensor_attribute`), that, the program's line and what to do
    instead where there is something; otherwise Python's own message."""
    if not tensor_attribute:
        return f"'TensorProxy' object has no attribute '{name}'"
    hint = ATTRIBUTE_HINTS.get(name, "")
    return f"reading tensor.{name} of the traced tensor {tensor} is not supported{called_at()}{hint}"


def check(cond: bool, message: Callable[[], str], error: type[Exception] = RuntimeError) -> None:
    """Raises `error(message())` when `cond` is false; the message is built only on failure."""
    if not cond:
        raise error(message())


def short_repr(value: object, limit: int = 60) -> str:
    """`repr(value)` on one line, cut to `limit` characters (for naming a bad argument in an error)."""
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def user_frame() -> str:
    """'file.py:12: source line' for the innermost caller outside the compiler and torch, or ''."""
    frame = sys._getframe(1)
    torch_dir = os.path.dirname(os.path.abspath(sys.modules["torch"].__file__))
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        generated = "<frozen" in path or frame.f_code.co_filename.startswith("<fusebench")
        if not path.startswith((_COMPILER_DIR, torch_dir)) and not generated:
            line = _source_line(path, frame.f_lineno)
            return f"{frame.f_code.co_filename}:{frame.f_lineno}" + (f": {line}" if line else "")
        frame = frame.f_back
    return ""


def _source_line(path: str, lineno: int) -> str:
    import linecache

    return linecache.getline(path, lineno).strip()


def called_at() -> str:
    """' (called at file.py:12: line)' naming the user's line, or '' when it cannot be found."""
    where = user_frame()
    return f" (called at {where})" if where else ""


# NOTE: `torch.Tensor.float(x)` checks in C that x is a torch.Tensor before any hook can see the call
_UNBOUND_METHOD = re.compile(r"descriptor '(\w+)' for '[\w.]+' objects doesn't apply to a 'TensorProxy' object")


def unbound_method_error(error: TypeError) -> NotImplementedError | None:
    """The one-line error for a Tensor method called on the class with a traced tensor
    (`torch.Tensor.float(x)`), naming the line that called it; None for any other TypeError."""
    match = _UNBOUND_METHOD.search(str(error))
    if match is None:
        return None
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = ""
    if tb is not None:
        path = tb.tb_frame.f_code.co_filename
        line = _source_line(os.path.abspath(path), tb.tb_lineno)
        where = f" (called at {path}:{tb.tb_lineno}{f': {line}' if line else ''})"
    name = match.group(1)
    return NotImplementedError(
        f"torch.Tensor.{name}(x), the method called on the class, is not supported while tracing (the traced "
        f"tensor is no torch.Tensor to torch's C check): write x.{name}(...){where}"
    )


def explaining_unbound_methods(fn: Callable, args: Sequence, kwargs: dict) -> Any:
    """`fn(*args, **kwargs)`; a Tensor method called on the class with a traced tensor raises
    `unbound_method_error`."""
    try:
        return fn(*args, **kwargs)
    except TypeError as error:
        explained = unbound_method_error(error)
        if explained is None:
            raise
        raise explained from None
