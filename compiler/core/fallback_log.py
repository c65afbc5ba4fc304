"""The process-wide log of fallbacks: pieces of programs that run eagerly, or with torch, because a
compiler could not compile them.

It lives in the core so that every layer can add to it: the runtime's fallbacks (dynamo's split
nodes and graph breaks, functions `jit` runs eagerly: `compiler/runtime/fallbacks.py`, which also
warns) and a fusion executor's regions that its compiler failed on
(`compiler/executors/region_fallback.py`). `compiler.examine.fallbacks()` reads it, and the harness
counts what a measurement added.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Fallback:
    """One piece of a program that runs eagerly: `what` (an op such as 'torch.linalg.eigvalsh',
    'a branch on a tensor value', 'the whole function f', or a fusion region 'nvFusion3 (51 prims)'),
    `where` ('file.py:12: source line', '' when unknown), `reason` (the compiler's error or
    dynamo's graph-break reason, one line) and `kind`: 'op' (an FX node split out), 'graph break'
    (dynamo's), 'graph' (a dynamo graph or piece of one), 'frame' (a frame dynamo gave up on whole,
    runtime/dynamo_frames.py), 'function' (compiler.jit), 'fusion' (a region whose fusion
    executor's compiler failed on it: it runs cut into pieces that compile, or its prims with
    torch, as its reason ends by saying)."""

    what: str
    where: str
    reason: str
    kind: str

    def __str__(self) -> str:
        at = f" at {self.where}" if self.where else ""
        ran = "fell back" if self.kind == "fusion" else "runs eagerly"
        return f"{self.what}{at} {ran} ({self.kind}): {self.reason}"


_LOGGED: list[Fallback] = []


def log(fallback: Fallback) -> None:
    """Adds `fallback` to the log (no warning: the caller warns the way its kind needs)."""
    _LOGGED.append(fallback)


def logged(since: int = 0) -> list[Fallback]:
    """The fallbacks logged in this process from number `since` on (0, 1, ... in order)."""
    return _LOGGED[since:]


def logged_count() -> int:
    """How many fallbacks this process has logged (a `since` for `logged`)."""
    return len(_LOGGED)
