"""The IR: bound symbols and traces, and printing a trace as runnable Python.

A trace is a straight-line program in single-assignment form. Each `BoundSymbol` applies a
symbol (a `Prim`, or a `Symbol` naming a torch-level op or an executor's fused region) to
arguments that are proxies (`compiler.core.proxies`) or Python constants, and binds its output
proxies. This module re-exports the proxies and the tracing context, so `compiler.core.ir` names the
whole IR.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any

import torch

from compiler.core.context import TraceContext, current, tracing
from compiler.core.errors import check
from compiler.core.proxies import (
    NumberProxy,
    Proxy,
    TensorProxy,
    is_unit,
    map_proxies,
    proxies_in,
    same_size,
    size_product,
)
from compiler.core.python_code import code_for

__all__ = [
    "BoundSymbol",
    "NumberProxy",
    "Proxy",
    "Symbol",
    "TensorProxy",
    "Trace",
    "TraceContext",
    "current",
    "is_unit",
    "map_proxies",
    "proxies_in",
    "same_size",
    "size_product",
    "tracing",
]

# ---------------------------------------------------------------------------------------------
# Bound symbols and traces


@dataclass(frozen=True)
class Symbol:
    """A callee that is not a prim: a torch-level op (printed by its torch name, lowered to its
    subsymbols) or an executor's region (printed by its name, run by `impl`). `checks`: a
    prologue check run for its effect (raising on a call it rejects), kept though it defines nothing."""

    name: str
    impl: Callable | None = field(default=None, compare=False)
    executor: str | None = None
    checks: bool = False

    def __repr__(self) -> str:
        return self.name


class _computed_once:
    """A property computed on first access and kept in the instance's `__dict__`, where later
    reads find it as a plain attribute (a frozen dataclass's fields never change, so neither does
    what is derived from them).

    NOTE: passes ask every line of a trace for its inputs and outputs many times over; a property
    call per ask was a large share of compile time. The value is a tuple: callers cannot change it.
    It is `functools.cached_property` without the lock that Python 3.11's takes on every first
    access (lines are made by the thousand per compile, each asked once at least).
    """

    def __init__(self, compute: Callable[[Any], Any]) -> None:
        self.compute = compute
        self.name = compute.__name__
        self.__doc__ = compute.__doc__

    def __get__(self, instance: Any, owner: type) -> Any:
        if instance is None:
            return self
        value = instance.__dict__[self.name] = self.compute(instance)
        return value


@dataclass(frozen=True, eq=False)
class BoundSymbol:
    """One line of a trace: `output = sym(*args, **kwargs)`, with the decomposition it stands for."""

    sym: Any  # a Prim or a Symbol
    args: tuple
    kwargs: dict
    output: Any
    subsymbols: tuple[BoundSymbol, ...] = ()

    @_computed_once
    def inputs(self) -> tuple[Proxy, ...]:
        """The proxies this line reads, in order (with repeats)."""
        return (*proxies_in(self.args), *proxies_in(self.kwargs))

    @_computed_once
    def outputs(self) -> tuple[Proxy, ...]:
        """The proxies this line defines."""
        return tuple(proxies_in(self.output))

    def replace(self, **changes: Any) -> BoundSymbol:
        """A copy with some fields changed."""
        # NOTE: `dataclasses.replace` looks the fields up on every call; passes replace many lines
        values = [changes.pop(name, getattr(self, name)) for name in _BOUND_SYMBOL_FIELDS]
        check(
            not changes,
            lambda: f"BoundSymbol.replace: unknown fields {sorted(changes)}, expected some of {_BOUND_SYMBOL_FIELDS}",
            TypeError,
        )
        return BoundSymbol(*values)

    def __str__(self) -> str:
        return "\n".join(bsym_lines(self))


_BOUND_SYMBOL_FIELDS = tuple(f.name for f in fields(BoundSymbol))


@dataclass
class Trace:
    """A straight-line program: inputs (proxies), bound symbols, and an output value tree."""

    inputs: tuple[Proxy, ...]
    bsyms: list[BoundSymbol]
    output: Any
    name: str = "computation"
    provenance: str = "tracing"

    def with_bsyms(self, bsyms: list[BoundSymbol], output: Any = None, **changes: Any) -> Trace:
        """A new trace with these bound symbols (and output, when given)."""
        return replace(self, bsyms=bsyms, output=self.output if output is None else output, **changes)

    def names(self) -> frozenset[str]:
        """Every proxy name used in the trace (for making fresh names in passes)."""
        names = {p.name for p in self.inputs}
        add = names.add
        stack = list(self.bsyms)
        while stack:
            b = stack.pop()
            for p in b.outputs:
                add(p.name)
            for p in b.inputs:
                add(p.name)
            if b.subsymbols:
                stack.extend(b.subsymbols)
        return frozenset(names)

    def __str__(self) -> str:
        return trace_source(self)

    def python(self, **namespace: Any) -> Callable:
        """Executes the printed source and returns the function it defines (for tests and repros).

        Symbols that have an implementation (fusion regions, executor ops) are bound under their
        printed names, so an execution trace runs as printed; `namespace` adds or overrides names."""
        scope: dict[str, Any] = {
            b.sym.name: b.sym.impl for b in self.bsyms if isinstance(b.sym, Symbol) and b.sym.impl is not None
        }
        scope.update(namespace)
        exec(code_for(str(self), f"<trace {self.name}>"), scope)
        return scope[self.name]


# ---------------------------------------------------------------------------------------------
# Printing


def canonical_device(device: Any) -> torch.device:
    """`device` (a string or device; None: torch's default) as a tensor made there carries it:
    'cuda' is the current CUDA device ('cuda:0'), as eager's factories and `.to` place it."""
    device = torch.get_default_device() if device is None else torch.device(device)
    if device.type == "cuda" and device.index is None and torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return device


def value_source(value: Any) -> str:
    """Python source for a constant or proxy tree (proxies print as their names)."""
    if isinstance(value, Proxy):
        return value.name
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else f"float('{value}')"
    if value is None or isinstance(value, (bool, int, str, complex)):
        return repr(value)
    if isinstance(value, torch.dtype):
        return str(value)
    if isinstance(value, torch.device):
        return f"torch.device('{value}')"
    if isinstance(value, tuple):
        items = [value_source(v) for v in value]
        plain = f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
        if type(value) is tuple:
            return plain
        kind = type(value)
        name = f"{kind.__module__}.{kind.__qualname__}"
        return f"{name}({', '.join(items)})" if hasattr(kind, "_fields") else f"{name}({plain})"
    if isinstance(value, list):
        return f"[{', '.join(value_source(v) for v in value)}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{value_source(k)}: {value_source(v)}" for k, v in value.items()) + "}"
    if isinstance(value, slice):
        return f"slice({value_source(value.start)}, {value_source(value.stop)}, {value_source(value.step)})"
    if value is Ellipsis:
        return "..."
    if isinstance(value, type):
        return value.__name__
    return repr(value)


def callee_name(sym: Any) -> str:
    """How a symbol is called in printed source: prims by `prims.<name>`, others by their name."""
    return sym.name if isinstance(sym, Symbol) else f"prims.{sym.value}"


def defined_proxies(bsym: BoundSymbol) -> list[Proxy]:
    """Every proxy `bsym` defines: its outputs, then those of its decomposition's bound symbols."""
    return [*bsym.outputs, *(p for sub in bsym.subsymbols for p in defined_proxies(sub))]


def bsym_lines(bsym: BoundSymbol, depth: int = 0) -> list[str]:
    """The printed lines of one bound symbol; its decomposition follows as indented comments."""
    args = [value_source(a) for a in bsym.args]
    args += [f"{k}={value_source(v)}" for k, v in bsym.kwargs.items()]
    call = f"{callee_name(bsym.sym)}({', '.join(args)})"
    output = bsym.output
    if output is None:
        line = call
    elif isinstance(output, Proxy):
        line = f"{output.name} = {call}"
    else:
        names = [value_source(o) for o in output]
        target = names[0] + "," if len(names) == 1 else ", ".join(names)
        line = f"{target} = {call}" if names else call
    types = ", ".join(f"{p.name}: {p.type_string()}" for p in bsym.outputs if type(p) is not Proxy)
    if types:
        line += f"  # {types}"
    prefix = "  # " + "  " * (depth - 1) if depth else ""
    lines = [prefix + line]
    for sub in bsym.subsymbols:
        lines += bsym_lines(sub, depth + 1)
    return lines


def import_line(sym: Any) -> str | None:
    """`from <module> import <function> [as <name>]`, which binds a symbol's printed name to its
    implementation where that is a module-level function; None for prims and torch-level ops (the
    header's imports reach them) and for implementations no import reaches (a fusion region)."""
    if not isinstance(sym, Symbol) or sym.impl is None or "." in sym.name:
        return None
    module_name, qualname = getattr(sym.impl, "__module__", None), getattr(sym.impl, "__qualname__", None)
    if not module_name or not qualname or getattr(sys.modules.get(module_name), qualname, None) is not sym.impl:
        return None
    return f"from {module_name} import {qualname}" + ("" if qualname == sym.name else f" as {sym.name}")


def trace_source(trace: Trace) -> str:
    """The whole trace as a Python module defining one function named after the trace."""
    imports = dict.fromkeys(line for line in map(import_line, (b.sym for b in trace.bsyms)) if line)
    lines = [f"# Constructed by {trace.provenance}", "import torch", "from compiler import prims", *imports, ""]
    lines.append(f"def {trace.name}({', '.join(p.name for p in trace.inputs)}):")
    for proxy in trace.inputs:
        if type(proxy) is not Proxy:
            lines.append(f"  # {proxy.name}: {proxy.type_string()}")
    for bsym in trace.bsyms:
        lines += ["  " + line for line in bsym_lines(bsym)]
    lines.append(f"  return {value_source(trace.output)}")
    return "\n".join(lines) + "\n"
