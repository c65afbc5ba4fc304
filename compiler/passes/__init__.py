"""Passes: pure `Trace -> Trace` functions, one per file, each stamped with its provenance.

`@trace_pass("name")` times the pass and records `# Constructed by name (took N ms)` on the
trace it returns; passes never mutate their input trace.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from compiler.core.ir import Trace


def trace_pass(name: str) -> Callable[[Callable[..., Trace]], Callable[..., Trace]]:
    """Decorates a `Trace -> Trace` function so its result carries `name` and its run time."""

    def decorator(fn: Callable[..., Trace]) -> Callable[..., Trace]:
        @functools.wraps(fn)
        def run(trace: Trace, *args: Any, **kwargs: Any) -> Trace:
            start = time.perf_counter()
            result = fn(trace, *args, **kwargs)
            took_ms = (time.perf_counter() - start) * 1e3
            return replace(result, provenance=f"{name} (took {took_ms:.2f} ms)")

        return run

    return decorator
