"""Executors: who runs each part of an execution trace, and the registry of those bundled.

Every executor follows `compiler.core.executor.Executor` (a fusion executor,
`FusionExecutor`); codegen asks the executors in the order the user gave and takes the first
answer, and the torch executor, which answers for every prim, always comes last.

Registered here: "nvfuser" (regions as nvFuser fusions; needs CUDA and `nvfuser_direct`),
"sdpa" (attention through torch's fused kernels on CUDA), "torch" (every prim) and "inductor"
(regions compiled by torch.compile's Inductor, on CPU and CUDA). Asking for an executor that
cannot run here raises `ExecutorUnavailableError` saying why (nvFuser with
`FusionOptions(runner="torch")` needs no nvFuser).

Defaults (`default_executor_names`), by device: on CUDA where nvFuser can run, ["nvfuser", "sdpa",
"torch"]; elsewhere (CPU) the names in the environment variable FUSEBENCH_CPU_EXECUTORS
(comma-separated), or without it ["inductor", "torch"] where Inductor can compile (a C++ compiler
is found), else ["torch"]. `jit(executors=None)` takes the defaults of this machine (CUDA where
nvFuser can run); the harness's `fusebench` variant those of the device it measures on. The test
suite sets FUSEBENCH_CPU_EXECUTORS=torch (tests/conftest.py), so its thousands of CPU calls keep
testing the torch executor without an Inductor compilation each; tests of Inductor name it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from compiler.core.errors import check
from compiler.core.executor import EXECUTORS, Executor, ExecutorSpec, FusionOptions, register_executor
from compiler.executors import inductor
from compiler.executors.inductor import InductorExecutor
from compiler.executors.nvfuser import ExecutorUnavailableError, NvFuserExecutor
from compiler.executors.nvfuser import executor as nvfuser_executor
from compiler.executors.sdpa import SdpaExecutor
from compiler.executors.torch import TorchExecutor

TORCH = TorchExecutor()
SDPA = SdpaExecutor()

__all__ = ["CPU_EXECUTORS_ENV", "SDPA", "TORCH", "ExecutorUnavailableError", "default_executor_names", "resolve"]

CPU_EXECUTORS_ENV = "FUSEBENCH_CPU_EXECUTORS"

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


register_executor(
    ExecutorSpec(
        "inductor",
        # NOTE: a fresh executor per jitted function (its counters); compiled regions are shared by structure.
        lambda fusion, fallback: InductorExecutor(fusion, fallback),
        lambda: inductor.unavailable_reason(),
        "regions of prims compiled by torch.compile's Inductor (CPU: C++/OpenMP; CUDA: Triton)",
    )
)


def default_executor_names(device: str | None = None) -> list[str]:
    """The executors `jit` uses when none are named, for tensors on `device` ("cuda" or "cpu";
    None: this machine's, "cuda" where nvFuser can run): nvFuser and SDPA on CUDA where nvFuser
    can run; elsewhere FUSEBENCH_CPU_EXECUTORS, or Inductor where it can compile, else torch."""
    check(
        device in (None, "cpu", "cuda"),
        lambda: f"default_executor_names(device={device!r}): expected 'cpu', 'cuda' or None",
        ValueError,
    )
    nvfuser_runs = EXECUTORS["nvfuser"].unavailable_reason() is None
    if device != "cpu" and nvfuser_runs:
        return ["nvfuser", "sdpa", "torch"]
    configured = os.environ.get(CPU_EXECUTORS_ENV)
    if configured is not None:
        names = [name.strip() for name in configured.split(",")]
        check(
            all(name in EXECUTORS for name in names),
            lambda: f"{CPU_EXECUTORS_ENV}={configured!r}: expected comma-separated names from {list(EXECUTORS)}",
            ValueError,
        )
        return names
    return ["inductor", "torch"] if EXECUTORS["inductor"].unavailable_reason() is None else ["torch"]


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
