"""Executors: who runs each part of an execution trace.

An executor has a `name` and `implementation(bsym) -> callable | None`; codegen asks the
executors in the order the user gave and takes the first answer. The torch executor answers for
every prim and always comes last.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from compiler.errors import check
from compiler.executors.torch import TorchExecutor

TORCH = TorchExecutor()
_KNOWN = {"torch": lambda: TORCH}


def default_executor_names() -> list[str]:
    """The executors `jit` uses when none are named."""
    return ["torch"]


def resolve(names: Sequence[str] | None) -> list[Any]:
    """Executor objects for `names` (the defaults for None), with torch appended as the fallback."""
    names = list(default_executor_names() if names is None else names)
    for name in names:
        check(
            name in _KNOWN,
            lambda name=name: f"unknown executor {name!r}; known executors: {sorted(_KNOWN)}",
            ValueError,
        )
    executors = [_KNOWN[name]() for name in names]
    if TORCH not in executors:
        executors.append(TORCH)
    return executors
