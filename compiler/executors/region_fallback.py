"""What a fusion region runs when its executor's compiler fails on it: its pieces, or its prims with torch.

Shared by the fusion executors (nvFuser, Inductor): the first failure of a region's compiler
(defining, compiling or running it) is warned about once with the executor's name, the region's
name, what the error says (`error_summary`: for nvFuser's asserts, the innermost check that
failed and where, not the boilerplate of its first line) and what the region runs as instead;
it is counted in the executor's stats and logged as a fallback of kind 'fusion'
(`compiler.core.fallback_log`: `compiler.examine.fallbacks()` lists it and the harness counts it
per measurement). That call and every later one run the region cut into pieces that compile
(`region_split.py`, for an executor that builds pieces) or its prims through the torch executor.
`fallback=False` to `jit` (or FUSEBENCH_NVFUSER_FALLBACK=0, the variable's name kept from when
nvFuser was the only fusion executor) raises the error instead: the fusion runner checks
`executor.fallback` before calling `RegionFallback.fall_back`.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable
from typing import Any

from compiler.core.executor import Region
from compiler.core.fallback_log import Fallback, log
from compiler.executors.region_split import MIN_FUSED, split_function, torch_function

FALLBACK_ENV = "FUSEBENCH_NVFUSER_FALLBACK"


class FusionFallbackWarning(UserWarning):
    """A fusion executor failed on a region; that region now runs cut into pieces, or its prims with torch."""


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


class RegionFallback:
    """One region's fallback: the error that caused it (None until then) and what runs instead.

    `compiler_name` ("nvFuser", "Inductor") and `warning` (a `FusionFallbackWarning` subclass)
    name the executor in the warning; `stats` is the executor's counters (its `fallbacks` field
    counts regions that fell back). With `make_piece` (the executor's region callable for a piece,
    built `quiet`), a failed region of more than `MIN_FUSED` prims runs as its two halves, each a
    region of the executor's that may fail and be cut again (`region_split.py`); without it, or
    for a smaller region, its prims run with torch. A `quiet` fallback (a piece's) neither warns,
    logs nor counts: the region it was cut from reports what became of all its pieces.

    Each failure costs a compilation, so once a region and its pieces have failed `MAX_FAILURES`
    times between them, a piece that fails runs its prims with torch, uncut (an error that every
    piece meets, such as a broken install or an exhausted device, would otherwise be met again in
    every piece down to the smallest). Pieces cut before that each fail once at most: at most
    `MAX_FAILURES` plus the depth of the cuts (log2 of the region's prims) failures in all.
    """

    MAX_FAILURES = 16

    def __init__(
        self,
        region: Region,
        compiler_name: str,
        warning: type[FusionFallbackWarning],
        make_piece: Callable[[Region], Callable] | None = None,
        executor_name: str = "",
        quiet: bool = False,
    ) -> None:
        self.region = region
        self.compiler_name = compiler_name
        self.warning = warning
        self.make_piece = make_piece
        self.executor_name = executor_name
        self.quiet = quiet
        self.error: BaseException | None = None
        self._function: Callable | None = None
        self._instead: Callable | None = None
        self.parts: list[Any] = []  # after a split: each half's callable, or its region where torch runs it
        self.failures = [0]  # failures of the region this one was cut from and of all its pieces (shared)

    def function(self) -> Callable:
        """The region's prims run with torch (compiled on first need)."""
        if self._function is None:
            self._function = torch_function(self.region)
        return self._function

    def run(self, args: tuple) -> Any:
        """The region's outputs for `args`, once it has fallen back: computed by its pieces, or by torch."""
        if self._instead is None:
            cut = self.failures[0] <= self.MAX_FAILURES and len(self.region.bsyms) > MIN_FUSED
            if self.make_piece is not None and cut:
                self._instead, self.parts = split_function(self.region, self._piece, self.executor_name)
            else:
                self._instead = self.function()
        return self._instead(*args)

    def _piece(self, piece: Region) -> Callable:
        """The executor's callable for `piece`, its fallback sharing this one's count of failures."""
        impl = self.make_piece(piece)
        inner = getattr(impl, "fallback", None)
        if isinstance(inner, RegionFallback):
            inner.failures = self.failures
        return impl

    def pieces(self) -> list[Any]:
        """Every piece the region was cut into, depth first (a piece, then the pieces it was cut into):
        the executor's callable of each (its own `fallback` says whether it failed), or the
        `Region` of one run with torch. Empty where the region was not cut."""
        found: list[Any] = []
        for part in self.parts:
            found.append(part)
            inner = getattr(part, "fallback", None)
            if isinstance(inner, RegionFallback):
                found.extend(inner.pieces())
        return found

    def outcome(self) -> tuple[int, int]:
        """(fusions, prims run with torch) that the region runs as since it fell back (or would)."""
        if not self.parts:
            return 0, len(self.region.bsyms)
        fusions = prims = 0
        for part in self.parts:
            if isinstance(part, Region):
                prims += len(part.bsyms)
                continue
            inner = getattr(part, "fallback", None)
            f, p = inner.outcome() if inner is not None and inner.error is not None else (1, 0)
            fusions, prims = fusions + f, prims + p
        return fusions, prims

    def runs_as(self) -> str:
        """What the region runs as since it fell back, in words."""
        fusions, prims = self.outcome()
        if not fusions:
            return f"its {prims} prims with torch"
        pieces = f"{fusions} {self.compiler_name} fusion{'s' if fusions > 1 else ''}"
        return f"{pieces} and {prims} prims with torch" if prims else f"{pieces} of its pieces"

    def fall_back(self, error: BaseException, args: tuple, stats: Any) -> Any:
        """Records `error` (later calls run `run`), returns the region's outputs for `args`
        computed so, then (unless `quiet`) warns once, counts it in `stats.fallbacks` and logs it:
        after this first call, every piece has compiled or fallen back itself."""
        self.error = error
        self.failures[0] += 1
        try:
            return self.run(args)
        finally:
            if not self.quiet:
                self._report(error, stats)

    def _report(self, error: BaseException, stats: Any) -> None:
        stats.fallbacks += 1
        name, summary, runs_as = self.region.name, error_summary(error), self.runs_as()
        what = f"{name} ({len(self.region.bsyms)} prims)"
        log(Fallback(what, "", f"{self.compiler_name} failed: {summary}; runs as {runs_as}", "fusion"))
        warnings.warn(
            f"{self.compiler_name} failed on {name} ({summary}); {name} now runs as {runs_as}, of "
            f"{len(self.region.bsyms)} prims. Pass fallback=False to jit (or set {FALLBACK_ENV}=0) to raise instead.",
            self.warning,
            stacklevel=3,
        )
