"""Codegen: an execution trace → Python source → a callable.

Each bound symbol becomes one call to the implementation its executor provides (bound as a
global of the generated module); constants that have no literal form (dtypes, devices, types)
are bound as globals too, so the hot path does no lookups beyond local names.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from compiler.core.errors import check
from compiler.core.ir import BoundSymbol, Proxy, Trace, callee_name
from compiler.core.proxies import proxies_in, rebuild_tuple
from compiler.core.python_code import code_for
from compiler.prims import Prim


class Globals:
    """The generated module's globals: implementations and constants, each under one name."""

    def __init__(self) -> None:
        self.scope: dict[str, Any] = {}
        self._names: dict[int, str] = {}

    def bind(self, obj: Any, hint: str) -> str:
        name = self._names.get(id(obj))
        if name is None:
            name = f"_{hint}_{len(self._names)}"
            self._names[id(obj)] = name
            self.scope[name] = obj
        return name

    def source(self, value: Any) -> str:
        """Python source for an argument: proxies by name, literals inline, other objects as globals."""
        if isinstance(value, Proxy):
            return value.name
        if value is None or isinstance(value, (bool, int, str)):
            return repr(value)
        if isinstance(value, float):
            return repr(value) if math.isfinite(value) else self.bind(value, "c")
        if isinstance(value, tuple):
            items = [self.source(v) for v in value]
            plain = f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
            if type(value) is tuple:
                return plain
            # A namedtuple or structseq (torch.return_types.max): rebuilt with its own type.
            return f"{self.bind(rebuild_tuple, 'rebuild')}({self.bind(type(value), 'type')}, [{', '.join(items)}])"
        if isinstance(value, list):
            return f"[{', '.join(self.source(v) for v in value)}]"
        if isinstance(value, dict):
            return "{" + ", ".join(f"{self.source(k)}: {self.source(v)}" for k, v in value.items()) + "}"
        if isinstance(value, slice):
            return f"slice({self.source(value.start)}, {self.source(value.stop)}, {self.source(value.step)})"
        return self.bind(value, "c")


def target_source(output: Any) -> str | None:
    if output is None:
        return None
    if isinstance(output, Proxy):
        return output.name
    names = [p.name if isinstance(p, Proxy) else "_" for p in output]
    if not names:
        return None
    return names[0] + "," if len(names) == 1 else ", ".join(names)


def implementation(bsym: BoundSymbol, executors: Sequence[Any]) -> Callable:
    """The callable that runs `bsym`: a region's own impl, or the first executor implementing the prim."""
    if not isinstance(bsym.sym, Prim):
        check(
            bsym.sym.impl is not None,
            lambda: f"{bsym.sym.name} has no implementation; flatten torch-level ops before codegen",
            TypeError,
        )
        return bsym.sym.impl
    for executor in executors:
        impl = executor.implementation(bsym)
        if impl is not None:
            return impl
    raise NotImplementedError(f"no executor among {[e.name for e in executors]} implements prims.{bsym.sym.value}")


Inline = Callable[[BoundSymbol, Globals], "list[str] | None"]


def last_uses(trace: Trace) -> list[list[str]]:
    """For each line of `trace`, the values it reads or defines for the last time: what the
    generated function deletes after it, so that a value's memory returns to the allocator once
    nothing reads it (as eager frees a temporary) instead of at the return. The trace's inputs
    (their caller holds them) and outputs are never deleted."""
    kept = {p.name for p in trace.inputs} | {p.name for p in proxies_in(trace.output)}
    last: dict[str, int] = {}
    for i, bsym in enumerate(trace.bsyms):
        for p in bsym.outputs:
            last[p.name] = i
        for p in bsym.inputs:
            last[p.name] = i
    dead: list[list[str]] = [[] for _ in trace.bsyms]
    for name, i in last.items():
        if name not in kept:
            dead[i].append(name)
    return dead


def python_source(
    trace: Trace, executors: Sequence[Any], inline: Mapping[Prim, Inline] | None = None, *, release: bool = True
) -> tuple[str, dict[str, Any]]:
    """(source of a function named `trace.name`, the globals it needs).

    `inline[prim](bsym, globals)` may return the lines that stand for `bsym` in place of a call
    (the prologue's guards, compiler/runtime/guard_source.py), or None to keep the call. With
    `release`, each value is deleted after the line that reads it last (`last_uses`).
    """
    g = Globals()
    lines = [f"def {trace.name}({', '.join(p.name for p in trace.inputs)}):"]
    dead = last_uses(trace) if release else [[] for _ in trace.bsyms]
    for bsym, names in zip(trace.bsyms, dead):
        lines += _line(bsym, executors, inline, g)
        if names:
            lines.append(f"  del {', '.join(names)}")
    lines.append(f"  return {g.source(trace.output)}")
    return "\n".join(lines) + "\n", g.scope


def _line(bsym: BoundSymbol, executors: Sequence[Any], inline: Mapping[Prim, Inline] | None, g: Globals) -> list[str]:
    """The generated lines of one bound symbol."""
    rule = inline.get(bsym.sym) if inline and isinstance(bsym.sym, Prim) else None
    inlined = rule(bsym, g) if rule is not None else None
    if inlined is None:
        impl = implementation(bsym, executors)
        # An implementation may carry its own source form (`inline_source(bsym, globals)`: lines,
        # or None to keep the call), which spares a Python call per line on the hot path.
        render = getattr(impl, "inline_source", None)
        inlined = render(bsym, g) if render is not None else None
    if inlined is not None:
        return [f"  {line}" for line in inlined]
    hint = bsym.sym.value if isinstance(bsym.sym, Prim) else "region"
    args = [g.source(a) for a in bsym.args] + [f"{k}={g.source(v)}" for k, v in bsym.kwargs.items()]
    call = f"{g.bind(impl, hint)}({', '.join(args)})"
    target = target_source(bsym.output)
    lines = [f"  {target} = {call}" if target else f"  {call}"]
    if not isinstance(bsym.sym, Prim):
        lines.append(f"  # {callee_name(bsym.sym)}")
    return lines


def compile_trace(
    trace: Trace, executors: Sequence[Any], inline: Mapping[Prim, Inline] | None = None, *, release: bool = True
) -> Callable:
    """A Python function that runs `trace` with the given executors (first claim wins), deleting
    each value after its last use where `release` (`python_source`)."""
    source, scope = python_source(trace, executors, inline, release=release)
    code = code_for(source, f"<fusebench {trace.name}>")
    exec(code, scope)
    fn = scope[trace.name]
    fn.__fusebench_source__ = source
    return fn
