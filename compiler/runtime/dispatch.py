"""The dispatcher: a jitted function's cache lookup as ONE generated Python function.

A call tries each entry's guards in order and runs the computation of the first entry whose
guards pass. Written as a loop that calls each entry's prologue, then its computation with the
unpacked inputs, that lookup costs about as much as the guards themselves (a call, a tuple of
inputs, a starred call, on every call). The dispatcher instead inlines the body of each
entry's generated prologue (compiler/runtime/guard_source.py) under one `try`, and calls the
computation with the prologue's outputs as plain positional arguments:

    def dispatch(*args, **kwargs):
      try:
        if len(args) != 1:
            raise _e0_GuardFailure_0
        x, = args
        ...
      except _GuardFailure:
        pass
      else:
        _stats.hits += 1
        return _computation_0(x)
      ...
      return _rest(args, kwargs)

Each entry's globals are renamed with its own prefix, so entries never share a name. A prologue
that is not generated source (a hand-written entry) is called as a function instead. Only the
first `INLINED` entries are inlined; `_rest` tries the others in a loop, then compiles.

The entries are tried in the order the cache gives (runtime/cache.py: the newest entry first,
then an entry the latest calls keep using is moved to the front), so a call laid out like the
last ones is accepted by the first guards it meets: one C++ tensor check and a few lines, no
other entry's guards failing first.

The jitted function (runtime/cache.py) is a `functools.partial` of the dispatcher, so a call
reaches it through C without a Python `__call__` frame; each compilation swaps the dispatcher's
code (`install`) and the function object stays the same.
"""

from __future__ import annotations

import ast
import functools
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from compiler.core.errors import GuardFailure
from compiler.core.python_code import code_for

INLINED = 8  # entries inlined; the others are tried by a loop
INLINED_LINES = 64  # a longer prologue or computation is called: its call costs nothing next to its work,
# and parsing it again per compilation would (an optimizer step's prologue has thousands of lines)
_OWN = frozenset({"args", "kwargs", "_inputs"})  # the dispatcher's own locals


@dataclass(frozen=True)
class _Inlined:
    """A generated function's text with its globals renamed: parameter names, the lines of its body
    without the final return, and the returned expression (the elements' sources when it is a
    tuple without starred parts, else None)."""

    parameters: tuple[str, ...]
    body: tuple[str, ...]
    returned: str
    elements: tuple[str, ...] | None


def _generated(fn: Callable, prefix: str, scope: dict[str, Any]) -> _Inlined | None:
    """Generated function `fn` (codegen's `__fusebench_source__`) with its globals renamed by
    `prefix` and added to `scope`; None when `fn` is not generated, is too long to inline, or its
    locals would clash with the dispatcher's."""
    source = getattr(fn, "__fusebench_source__", None)
    if source is None or not isinstance(fn, types.FunctionType):  # e.g. a runner that shows its source
        return None
    if source.count("\n") - source.count("\n  del ") > INLINED_LINES:  # deletions cost no call to save
        return None
    own = {name: value for name, value in fn.__globals__.items() if name.startswith("_") and name != "__builtins__"}
    inlined = _renamed(source, prefix, frozenset(own))
    if inlined is not None:
        scope.update({prefix + name: value for name, value in own.items()})
    return inlined


@functools.lru_cache(maxsize=1024)
def _renamed(source: str, prefix: str, names: frozenset[str]) -> _Inlined | None:
    """`_generated`'s parsing, once per text: a recompilation for inputs like earlier ones, or a
    fresh `jit` of the same code, writes the same source."""
    function = ast.parse(source).body[0]
    if not isinstance(function, ast.FunctionDef) or not function.body:
        return None
    *body, returned = function.body
    if not isinstance(returned, ast.Return) or returned.value is None:
        return None
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id in _OWN:
            return None
        if isinstance(node, ast.Name) and node.id in names:
            node.id = prefix + node.id
    value = returned.value
    plain = isinstance(value, ast.Tuple) and not any(isinstance(e, ast.Starred) for e in value.elts)
    return _Inlined(
        tuple(a.arg for a in function.args.args),
        tuple(line for statement in body for line in ast.unparse(statement).splitlines()),
        ast.unparse(value),
        tuple(ast.unparse(e) for e in value.elts) if plain else None,
    )


def _guards(entry: Any, i: int, scope: dict[str, Any]) -> tuple[list[str], list[str] | None]:
    """(the lines of entry `i`'s guards, the sources of the inputs they produce, or None when
    they are one tuple `_inputs`)."""
    parsed = _generated(entry.prologue, f"_e{i}", scope)
    if parsed is None or parsed.parameters != ("args", "kwargs"):
        scope[f"_prologue_{i}"] = entry.prologue
        return [f"_inputs = _prologue_{i}(args, kwargs)"], None
    if parsed.elements is not None:
        return list(parsed.body), list(parsed.elements)
    return [*parsed.body, f"_inputs = {parsed.returned}"], None


def _run(entry: Any, i: int, inputs: list[str] | None, scope: dict[str, Any]) -> list[str]:
    """The lines that run entry `i`'s computation on `inputs` and return its result: its body
    inline when it is short generated code, else a call."""
    parsed = _generated(entry.computation, f"_c{i}", scope) if inputs is not None else None
    if parsed is None or len(parsed.parameters) != len(inputs):
        scope[f"_computation_{i}"] = entry.computation
        return [f"return _computation_{i}({', '.join(inputs) if inputs is not None else '*_inputs'})"]
    parameters = list(parsed.parameters)
    bind = [f"{', '.join(parameters)}, = {', '.join(inputs)},"] if parameters != inputs else []
    return [*bind, *parsed.body, f"return {parsed.returned}"]


def dispatcher(rest: Callable[[tuple, dict], Any]) -> Callable[..., Any]:
    """A dispatcher with no entries yet: every call is `rest(args, kwargs)`. `install` gives it
    the code of the entries compiled since (the function object, the one a caller holds, stays)."""
    scope: dict[str, Any] = {"_GuardFailure": GuardFailure, "_rest": rest}
    source = "def dispatch(*args, **kwargs):\n  return _rest(args, kwargs)\n"
    exec(code_for(source, "<fusebench dispatch>"), scope)
    return scope["dispatch"]


def install(dispatch: Callable[..., Any], entries: Sequence[Any], owner: Any) -> None:
    """Rewrites `dispatch` (made by `dispatcher`) to try `entries` (each with `prologue` and
    `computation`) in the order given and run the first whose guards accept the call, counting the
    hit in `owner.stats.hits` and, when there are several entries, recording it as
    `owner.last_entry`; a hit by an entry tried after another calls `owner.later_hit(entry)` (the
    first one's hits, the fast path, pay nothing more). It calls its `rest` when none of the first
    `INLINED` entries accepts. Each entry's names carry its position in `owner.entries` (its
    compilation order), so reordering the same entries reuses their parsed code."""
    scope = dispatch.__globals__
    scope.update(_owner=owner, _stats=owner.stats)
    parsed = scope.setdefault("_parsed", {})
    labels = {id(entry): i for i, entry in enumerate(getattr(owner, "entries", entries))}
    lines = ["def dispatch(*args, **kwargs):"]
    for position, entry in enumerate(entries[:INLINED]):
        i = labels.get(id(entry), position)
        if parsed.get(i, (None,))[0] is not entry:
            scope[f"_entry_{i}"] = entry
            guards, inputs = _guards(entry, i, scope)
            parsed[i] = (entry, guards, _run(entry, i, inputs, scope))
        _, guards, run = parsed[i]
        lines += ["  try:", *(f"    {line}" for line in guards), "  except _GuardFailure:", "    pass", "  else:"]
        lines += ["    _stats.hits += 1"]
        if position:
            lines += [f"    _owner.later_hit(_entry_{i})"]
        elif len(entries) > 1:
            lines += [f"    _owner.last_entry = _entry_{i}"]
        lines += [f"    {line}" for line in run]
    lines.append("  return _rest(args, kwargs)")
    source = "\n".join(lines) + "\n"
    namespace: dict[str, Any] = {}
    exec(code_for(source, "<fusebench dispatch>"), scope, namespace)
    dispatch.__code__ = namespace["dispatch"].__code__
    dispatch.__fusebench_source__ = source
