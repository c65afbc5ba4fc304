"""The nvFuser executor: regions of a trace become `nvfuser_direct` fusion definitions.

Grouped by job:
- `executor`: the executor object (`NvFuserExecutor`), a fusion's per-call runner (`NvFusion`),
  availability checks and the torch fallback.
- `define/`: building a definition from a region: the per-prim translation table
  (`translations`, keyed by `Prim`), the definition being written (`writer`), input descriptors,
  broadcast flags, output layouts, which prims a fusion claims and which write-backs nvFuser
  writes in place.
- `run/`: running definitions: definitions shared by structure across the process, nvFuser's
  kernels kept on disk, edge sizes (0/1) run with torch until they recur, batched small updates.
- `diagnose/`: standalone repro scripts.
"""

from compiler.executors.nvfuser.executor import (
    FALLBACK_ENV,
    ExecutorUnavailableError,
    FusionFallbackWarning,
    InputRecord,
    NvFuserExecutor,
    NvFuserStats,
    NvFusion,
    region_fusions,
    unavailable_reason,
)

__all__ = [
    "FALLBACK_ENV",
    "ExecutorUnavailableError",
    "FusionFallbackWarning",
    "InputRecord",
    "NvFuserExecutor",
    "NvFuserStats",
    "NvFusion",
    "region_fusions",
    "unavailable_reason",
]
