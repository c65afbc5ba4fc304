"""Passes: pure `Trace -> Trace` functions, one per file, each stamped with its provenance.

`@trace_pass("name")` times the pass and records `# Constructed by name (took N ms)` on the
trace it returns; passes never mutate their input trace. Functions in `PASS_OBSERVERS` are called
with (name, the trace returned, milliseconds) after each pass (scripts/compile_profile.py).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from compiler.core.ir import Trace

PASS_OBSERVERS: list[Callable[[str, Trace, float], None]] = []


def trace_pass(name: str) -> Callable[[Callable[..., Trace]], Callable[..., Trace]]:
    """Decorates a `Trace -> Trace` function so its result carries `name` and its run time."""

    def decorator(fn: Callable[..., Trace]) -> Callable[..., Trace]:
        @functools.wraps(fn)
        def run(trace: Trace, *args: Any, **kwargs: Any) -> Trace:
            start = time.perf_counter()
            result = fn(trace, *args, **kwargs)
            took_ms = (time.perf_counter() - start) * 1e3
            result = replace(result, provenance=f"{name} (took {took_ms:.2f} ms)")
            for observe in PASS_OBSERVERS:
                observe(name, result, took_ms)
            return result

        return run

    return decorator
