"""What a fusion region runs when its executor's compiler fails on it: its prims, with torch.

Shared by the fusion executors (nvFuser, Inductor): the first failure of a region's compiler
(defining, compiling or running it) is warned about once with the executor's name, the region's
name and what the error says (`error_summary`: for nvFuser's asserts, the innermost check that
failed and where, not the boilerplate of its first line), counted in the executor's stats, and
logged as a fallback of kind 'fusion' (`compiler.core.fallback_log`: `compiler.examine.fallbacks()`
lists it and the harness counts it per measurement); that call and every later one run the
region's prims through the torch executor. `fallback=False` to `jit` (or
FUSEBENCH_NVFUSER_FALLBACK=0, the variable's name kept from when nvFuser was the only fusion
executor) raises the error instead: the fusion runner checks `executor.fallback` before calling
`RegionFallback.fall_back`.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable
from typing import Any

from compiler.core.executor import Region
from compiler.core.fallback_log import Fallback, log
from compiler.core.ir import Trace
from compiler.executors.codegen import compile_trace
from compiler.executors.torch import TorchExecutor

FALLBACK_ENV = "FUSEBENCH_NVFUSER_FALLBACK"
_TORCH = TorchExecutor()


class FusionFallbackWarning(UserWarning):
    """A fusion executor failed on a region; that region now runs its prims with torch."""


def fallback_default() -> bool:
    """Whether failing regions fall back to torch when `jit(fallback=None)` (env FUSEBENCH_NVFUSER_FALLBACK)."""
    return os.environ.get(FALLBACK_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


_EXPECTED = re.compile(r"Expected (.+)")
_ASSERTED_AT = re.compile(r"INTERNAL ASSERT FAILED at (\S+?):(\d+)")
_RAISED_AT = re.compile(r"Exception raised from \S+ at (\S+?):(\d+)")
SUMMARY_CHARS = 400


def error_summary(error: BaseException) -> str:
    """'TypeName: what failed' in one line. For nvFuser's errors: where its innermost check failed
    and what it expected ('RuntimeError: fusion.cpp:1020: Expected id0->extent()->sameAs(...) .
    Invalid domains to map: ...'), found past the boilerplate its first line holds and the error of
    parallel compilation that wraps a segment's ('Error from segmentation group 3: ...'). Other
    errors: their first line."""
    text = str(error).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    located = _ASSERTED_AT.findall(text) or _RAISED_AT.findall(text)[:1]  # only nvFuser's errors say these
    reasons = [m[1].strip() for line in lines if (m := _EXPECTED.search(line))] if located else []
    if reasons:
        summary = f"{os.path.basename(located[-1][0])}:{located[-1][1]}: Expected {reasons[-1]}"
    else:
        summary = lines[0] if lines else ""
    return f"{type(error).__name__}: {summary[:SUMMARY_CHARS]}"


def torch_function(region: Region) -> Callable:
    """`region`'s prims as one Python function run by the torch executor (args: its inputs;
    returns its outputs)."""
    trace = Trace(region.inputs, list(region.bsyms), region.outputs, name=region.name.lower())
    return compile_trace(trace, [_TORCH])


class RegionFallback:
    """One region's torch fallback: the error that caused it (None until then) and its function.

    `compiler_name` ("nvFuser", "Inductor") and `warning` (a `FusionFallbackWarning` subclass)
    name the executor in the warning; `stats` is the executor's counters (its `fallbacks` field
    counts regions that fell back).
    """

    def __init__(self, region: Region, compiler_name: str, warning: type[FusionFallbackWarning]) -> None:
        self.region = region
        self.compiler_name = compiler_name
        self.warning = warning
        self.error: BaseException | None = None
        self._function: Callable | None = None

    def function(self) -> Callable:
        """The region's prims run with torch (compiled on first need)."""
        if self._function is None:
            self._function = torch_function(self.region)
        return self._function

    def fall_back(self, error: BaseException, args: tuple, stats: Any) -> Any:
        """Records `error` (later calls run with torch: see `error`), warns once, counts it in
        `stats.fallbacks` and in the fallback log, and returns the region's outputs for `args`
        computed with torch."""
        self.error = error
        stats.fallbacks += 1
        name, summary = self.region.name, error_summary(error)
        what = f"{name} ({len(self.region.bsyms)} prims)"
        log(Fallback(what, "", f"{self.compiler_name} failed: {summary}", "fusion"))
        warnings.warn(
            f"{self.compiler_name} failed on {name} ({summary}); {name} now runs its "
            f"{len(self.region.bsyms)} prims with torch. Pass fallback=False to jit (or set {FALLBACK_ENV}=0) "
            "to raise instead.",
            self.warning,
            stacklevel=2,
        )
        return self.function()(*args)
