"""Executors: who runs each part of an execution trace, and the registry of those bundled.

Every executor follows `compiler.core.executor.Executor` (a fusion executor,
`FusionExecutor`); codegen asks the executors in the order the user gave and takes the first
answer, and the torch executor, which answers for every prim, always comes last.

Registered here: "nvfuser" (regions as nvFuser fusions; needs CUDA and `nvfuser_direct`),
"sdpa" (attention through torch's fused kernels on CUDA) and "torch" (every prim). Defaults:
["nvfuser", "sdpa", "torch"] where nvFuser can run, ["torch"] otherwise. Asking for an executor
that cannot run here raises `ExecutorUnavailableError` saying why (nvFuser with
`FusionOptions(runner="torch")` needs no nvFuser).
"""

from __future__ import annotations

from collections.abc import Sequence

from compiler.core.errors import check
from compiler.core.executor import EXECUTORS, Executor, ExecutorSpec, FusionOptions, register_executor
from compiler.executors.nvfuser import ExecutorUnavailableError, NvFuserExecutor
from compiler.executors.nvfuser import executor as nvfuser_executor
from compiler.executors.sdpa import SdpaExecutor
from compiler.executors.torch import TorchExecutor

TORCH = TorchExecutor()
SDPA = SdpaExecutor()

__all__ = ["SDPA", "TORCH", "ExecutorUnavailableError", "default_executor_names", "resolve"]

register_executor(
    ExecutorSpec(
        "nvfuser",
        # NOTE: a fresh nvFuser executor per jitted function: its counters belong to that function.
        lambda fusion, fallback: NvFuserExecutor(fusion, fallback),
        lambda: nvfuser_executor.unavailable_reason(),
        "regions of prims as nvFuser fusion definitions (CUDA)",
    )
)
register_executor(
    ExecutorSpec("sdpa", lambda fusion, fallback: SDPA, lambda: None, "attention through torch's fused kernels (CUDA)")
)
register_executor(ExecutorSpec("torch", lambda fusion, fallback: TORCH, lambda: None, "every prim, with torch"))


def default_executor_names() -> list[str]:
    """The executors `jit` uses when none are named: nvFuser and SDPA where nvFuser can run."""
    return ["nvfuser", "sdpa", "torch"] if EXECUTORS["nvfuser"].unavailable_reason() is None else ["torch"]


def resolve(
    names: Sequence[str] | None, *, fusion: FusionOptions | None = None, fallback: bool | None = None
) -> list[Executor]:
    """Executor objects for `names` (the defaults for None), with torch appended as the fallback."""
    check(
        names is None or (isinstance(names, (list, tuple)) and all(isinstance(n, str) for n in names)),
        lambda: f"jit(executors={names!r}): expected a list of executor names such as {list(EXECUTORS)}, or None",
        TypeError,
    )
    names = list(default_executor_names() if names is None else names)
    for name in names:
        check(
            name in EXECUTORS,
            lambda name=name: (
                f"jit(executors={names!r}): unknown executor {name!r}; expected names from {list(EXECUTORS)}"
            ),
            ValueError,
        )
        check(
            names.count(name) == 1,
            lambda name=name: f"jit(executors={names!r}): {name!r} is named twice; expected each executor at most once",
            ValueError,
        )
    options = fusion or FusionOptions()
    executors = [EXECUTORS[name].make(options, fallback) for name in names]
    if TORCH not in executors:
        executors.append(TORCH)
    return executors
