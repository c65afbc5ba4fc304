"""Executors: who runs each part of an execution trace.

An executor has a `name` and `implementation(bsym) -> callable | None`; codegen asks the
executors in the order the user gave and takes the first answer. The torch executor answers for
every prim and always comes last. A fusion executor (nvFuser) additionally claims prims for
regions (`claim`, `region_impl`); the fusion pass replaces each region by one bound symbol that
carries its own callable.

Defaults: ["nvfuser", "sdpa", "torch"] when CUDA is available and `nvfuser_direct` imports,
["torch"] otherwise. Asking for "nvfuser" where it cannot run raises `ExecutorUnavailableError`
saying why (unless FusionOptions(runner="torch"), which needs no nvFuser).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from compiler.core.errors import check
from compiler.executors import nvfuser as nvfuser_executor
from compiler.executors.nvfuser import ExecutorUnavailableError, NvFuserExecutor
from compiler.executors.sdpa import SdpaExecutor
from compiler.executors.torch import TorchExecutor
from compiler.passes.fuse import FusionOptions

TORCH = TorchExecutor()
SDPA = SdpaExecutor()
_KNOWN = ("nvfuser", "sdpa", "torch")

__all__ = ["SDPA", "TORCH", "ExecutorUnavailableError", "default_executor_names", "resolve"]


def default_executor_names() -> list[str]:
    """The executors `jit` uses when none are named: nvFuser and SDPA where nvFuser can run."""
    return ["nvfuser", "sdpa", "torch"] if nvfuser_executor.unavailable_reason() is None else ["torch"]


def resolve(
    names: Sequence[str] | None, *, fusion: FusionOptions | None = None, fallback: bool | None = None
) -> list[Any]:
    """Executor objects for `names` (the defaults for None), with torch appended as the fallback.

    A fresh nvFuser executor is made per call, so its definition/compilation counters belong to
    one jitted function.
    """
    check(
        names is None or (isinstance(names, (list, tuple)) and all(isinstance(n, str) for n in names)),
        lambda: f"jit(executors={names!r}): expected a list of executor names such as {list(_KNOWN)}, or None",
        TypeError,
    )
    names = list(default_executor_names() if names is None else names)
    for name in names:
        check(
            name in _KNOWN,
            lambda name=name: (
                f"jit(executors={names!r}): unknown executor {name!r}; expected names from {list(_KNOWN)}"
            ),
            ValueError,
        )
        check(
            names.count(name) == 1,
            lambda name=name: f"jit(executors={names!r}): {name!r} is named twice; expected each executor at most once",
            ValueError,
        )
    executors: list[Any] = []
    for name in names:
        if name == "nvfuser":
            executors.append(NvFuserExecutor(fusion, fallback))
        else:
            executors.append({"sdpa": SDPA, "torch": TORCH}[name])
    if TORCH not in executors:
        executors.append(TORCH)
    return executors
