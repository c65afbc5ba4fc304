"""check_trace: the IR's type checker (single assignment, no unbound proxies, meta agrees).

Tests run it after every pass; it raises `TraceError` naming the line and the proxy at fault.
"""

from __future__ import annotations

from typing import Any

from compiler.core.ir import (
    BoundSymbol,
    NumberProxy,
    Symbol,
    TensorProxy,
    Trace,
    TraceContext,
    proxies_in,
    tracing,
)
from compiler.prims import META, Prim


class TraceError(AssertionError):
    """A trace broke one of the IR's invariants."""


def _agrees(expected: Any, actual: Any) -> bool:
    if isinstance(expected, TensorProxy):
        if not isinstance(actual, TensorProxy) or len(expected.shape) != len(actual.shape):
            return False
        if expected.dtype != actual.dtype or expected.device != actual.device:
            return False
        for a, b in zip(expected.shape, actual.shape):
            if isinstance(a, int) != isinstance(b, int) or (isinstance(a, int) and a != b):
                return False
        return True
    if isinstance(expected, NumberProxy):
        return isinstance(actual, NumberProxy) and expected.python_type is actual.python_type
    if isinstance(expected, (tuple, list)):
        return (
            isinstance(actual, (tuple, list)) and len(expected) == len(actual) and all(map(_agrees, expected, actual))
        )
    return expected is None and actual is None


def _check_bsym(bsym: BoundSymbol, defined: set[str], where: str) -> None:
    for p in bsym.inputs:
        if p.name not in defined:
            raise TraceError(f"{where}: {p.name} is read before it is defined in:\n{bsym}")
    if isinstance(bsym.sym, Symbol) and bsym.subsymbols:
        inner = set(defined)
        for i, sub in enumerate(bsym.subsymbols):
            _check_bsym(sub, inner, f"{where} (subsymbol {i})")
        for p in bsym.outputs:
            if p.name not in inner:
                raise TraceError(f"{where}: {bsym.sym.name} outputs {p.name}, which its decomposition never defines")
    for p in bsym.outputs:
        if p.name in defined:
            raise TraceError(f"{where}: {p.name} is assigned twice (second time in: {bsym})")
        defined.add(p.name)
    if isinstance(bsym.sym, Prim) and META[bsym.sym] is not None:
        with tracing(TraceContext()):
            inferred = META[bsym.sym](*bsym.args)
        if not _agrees(inferred, bsym.output):
            raise TraceError(f"{where}: the meta function of prims.{bsym.sym.value} disagrees with {bsym}")


def check_trace(trace: Trace) -> Trace:
    """Raises TraceError unless `trace` is well formed; returns it for chaining."""
    defined: set[str] = set()
    for p in trace.inputs:
        if p.name in defined:
            raise TraceError(f"input {p.name} appears twice in the signature of {trace.name}")
        defined.add(p.name)
    for i, bsym in enumerate(trace.bsyms):
        _check_bsym(bsym, defined, f"{trace.name} line {i}")
    for p in proxies_in(trace.output):
        if p.name not in defined:
            raise TraceError(f"{trace.name} returns {p.name}, which is never defined")
    return trace
