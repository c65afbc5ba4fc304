"""Automatic dynamic: why no cache entry accepted a call, and which numbers to make symbolic.

On a miss (only then: hits never come here) every entry's prologue trace is replayed guard by
guard on the call's arguments with the reference semantics of the prims, and each guard that
fails is recorded as a `GuardMiss`: which guard, on which input, the value the entry was
compiled for and the value of this call. The misses of one call form a `Recompilation`, kept on
the jitted function and shown by `compiler.examine.recompilations(jfn)`.

Under `numbers="constant"` a number argument whose baked-in value some entry rejected is made
symbolic for every later compilation (as torch.compile's automatic dynamic does): the next
entry keeps it as an input, with the branches taken on it guarded, so any further value that
takes the same branches reuses that entry. The results stay exact: a symbolic number is only
ever used by the computation through the prims that depend on it, and every condition the
trace took on it is a prologue guard.

Tensor sizes the same way, under either `numbers` mode: a dim of a tensor argument whose size an entry
rejected (same dtype, device and rank) is symbolic in every later compilation ('x.size(0)'), for
the sizes of at least 2 (a size of 0 or 1 still gets its own entry, whose broadcasting differs).
The computation takes it as an int input, so the ops on it record their shape conditions as
guards like those on any symbolic number.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from compiler import prims
from compiler.core.errors import GuardFailure, check
from compiler.core.ir import BoundSymbol, NumberProxy, Proxy, TensorProxy, Trace, map_proxies
from compiler.ops import autocast
from compiler.prims import GUARDS, Prim
from compiler.tracing.free_values import CHECK_FREE_VALUES, dynamic_name
from compiler.tracing.frontend import size_name

_NUMBERS = (int, float, bool)
_UNPACKS = (Prim.UNPACK_SEQUENCE, Prim.UNPACK_DICT)


@dataclass(frozen=True)
class GuardMiss:
    """One guard of one cache entry that rejected a call.

    kind: "value" (a number or constant argument), "size", "dtype", "device", "type",
        "structure" (argument count, sequence length, dict keys), "branch" (a condition the trace
        took on symbolic numbers), "layout" (strides), "aliasing" or "free value" (a global or
        closure variable the trace read, tracing/free_values.py).
    """

    entry: int
    kind: str
    input: str
    expected: Any
    actual: Any
    guard: str

    def __str__(self) -> str:
        return f"entry {self.entry}: {self.kind} of {self.input}: expected {self.expected!r}, got {self.actual!r}"


@dataclass
class Recompilation:
    """Why the `call`-th call (counting from 1) compiled a new entry, and what it made symbolic."""

    call: int
    misses: list[GuardMiss] = field(default_factory=list)
    made_symbolic: tuple[str, ...] = ()

    def __str__(self) -> str:
        head = f"call {self.call}: recompiled"
        if self.made_symbolic:
            head += f", making {', '.join(self.made_symbolic)} symbolic"
        return "\n".join([head, *(f"  {m}" for m in self.misses)] if self.misses else [head + " (first call)"])


def _value(x: Any, env: dict[str, Any]) -> Any:
    return map_proxies(x, lambda p: env[p.name])


class Shape(tuple):
    """A guarded shape, printed with '≥2' for its symbolic sizes (None)."""

    def __repr__(self) -> str:
        sizes = ["≥2" if s is None else repr(s) for s in self]
        return f"({sizes[0]},)" if len(sizes) == 1 else f"({', '.join(sizes)})"


def _tensor_miss(entry: int, bsym: BoundSymbol, t: Any) -> GuardMiss:
    proxy, shape, dtype, device = bsym.args
    name, line = proxy.name, str(bsym).splitlines()[0]
    if not isinstance(t, torch.Tensor):
        return GuardMiss(entry, "type", name, torch.Tensor, type(t), line)
    for kind, expected, actual in (("dtype", dtype, t.dtype), ("device", device, t.device)):
        if expected != actual:
            return GuardMiss(entry, kind, name, expected, actual, line)
    return GuardMiss(entry, "size", name, Shape(shape), tuple(t.shape), line)


def _miss(entry: int, bsym: BoundSymbol, env: dict[str, Any], arguments: set[str]) -> GuardMiss:
    """The `GuardMiss` for a guard `bsym` that raised on the values in `env`."""
    line = str(bsym).splitlines()[0]
    first = bsym.args[0]
    actual = _value(first, env)
    if bsym.sym is Prim.CHECK_TENSOR:
        return _tensor_miss(entry, bsym, actual)
    if bsym.sym is Prim.CHECK_AUTOCAST:
        return GuardMiss(entry, "autocast", "torch.autocast", first or "off", autocast.state() or "off", line)
    name = first.name if isinstance(first, Proxy) else repr(first)
    if bsym.sym is Prim.CHECK_TYPE:
        return GuardMiss(entry, "type", name, bsym.args[1], type(actual), line)
    if bsym.sym is Prim.CHECK_VALUE:
        kind = "value" if name in arguments else "branch"
        return GuardMiss(entry, kind, name, bsym.args[1], actual, line)
    if bsym.sym is Prim.CHECK_STRIDES:
        return GuardMiss(entry, "layout", name, _value(bsym.args[1], env), actual.stride(), line)
    if bsym.sym is Prim.CHECK_ALIASING:
        return GuardMiss(entry, "aliasing", ", ".join(p.name for p in first), "as traced", "different", line)
    if bsym.sym is Prim.UNPACK_SEQUENCE:
        return GuardMiss(entry, "structure", name, f"length {bsym.args[1]}", f"length {len(actual)}", line)
    if bsym.sym is not Prim.UNPACK_DICT:  # NOTE: a prologue Symbol: a captured tensor's places (read_captured)
        return GuardMiss(entry, "structure", str(bsym.output), "one tensor in every place", "not so", line)
    return GuardMiss(entry, "structure", name, f"keys {list(bsym.args[1])}", f"keys {list(actual)}", line)


def explain(entry: int, prologue: Trace, args: tuple, kwargs: dict) -> list[GuardMiss]:
    """Every guard of `prologue` (entry number `entry`) that rejects `(args, kwargs)`.

    Guards after a failed unpacking, and arithmetic on values that could not be unpacked, are
    skipped: they read values this call does not have.
    """
    env: dict[str, Any] = {p.name: v for p, v in zip(prologue.inputs, (args, kwargs))}
    arguments = {p.name for b in prologue.bsyms if b.sym in _UNPACKS for p in b.outputs}
    misses: list[GuardMiss] = []
    rejected: set[str] = set()  # tensors whose check_tensor failed: their sizes are not read
    for bsym in prologue.bsyms:
        if any(p.name not in env for p in bsym.inputs):
            continue
        if bsym.sym is Prim.SIZE and bsym.args[0].name in rejected:
            continue
        try:
            arguments_of = _value(bsym.args, env)
            # NOTE: a prologue Symbol (`object_state`, tracing/objects.py) runs its own implementation
            output = (
                prims.evaluate(bsym.sym, arguments_of) if isinstance(bsym.sym, Prim) else bsym.sym.impl(*arguments_of)
            )
        except GuardFailure:
            if bsym.sym is CHECK_FREE_VALUES:
                line = str(bsym).splitlines()[0]
                misses += [
                    GuardMiss(entry, "free value", dynamic_name(p), old, new, line)
                    for p, old, new in bsym.args[0].changed()
                ]
                continue
            misses.append(_miss(entry, bsym, env, arguments))
            if bsym.sym in _UNPACKS:
                return misses
            if bsym.sym is Prim.CHECK_TENSOR:
                rejected.add(bsym.args[0].name)
            continue
        except Exception as error:  # NOTE: a guard or number arithmetic reading a value of another type
            subject = str(bsym.output) if bsym.output is not None else ", ".join(p.name for p in bsym.inputs)
            misses.append(GuardMiss(entry, "type", subject, "a value of the traced type", repr(error), str(bsym)))
            continue
        if bsym.sym is Prim.UNPACK_SEQUENCE and len(output) != len(bsym.output):
            continue
        if isinstance(bsym.output, Proxy):
            env[bsym.output.name] = output
        elif bsym.output is not None and bsym.sym not in GUARDS:
            for p, value in zip(bsym.output, output):
                if isinstance(p, Proxy):
                    env[p.name] = value
    return misses


def explain_all(prologues: Sequence[Trace], args: tuple, kwargs: dict) -> list[GuardMiss]:
    """The misses of every entry (numbered from 0 in cache order) on one call."""
    return [miss for i, prologue in enumerate(prologues) for miss in explain(i, prologue, args, kwargs)]


def symbolic_candidates(prologue: Trace) -> list[str]:
    """What automatic dynamic and `jit(dynamic=...)` can name in an entry with this prologue: each
    number argument's input name and each tensor argument's sizes ('x.size(1)'), in order."""
    names: list[str] = []
    for bsym in prologue.bsyms:
        if bsym.sym in _UNPACKS:
            for p in bsym.output:
                if isinstance(p, TensorProxy):
                    names += [size_name(p.name, d) for d in range(p.ndim)]
                elif isinstance(p, NumberProxy):
                    names.append(p.name)
    return names


def check_requested(requested: Iterable[str], prologue: Trace, function: str) -> None:
    """Raises ValueError when a name given to `jit(dynamic=...)` is not among the first entry's
    `symbolic_candidates`, naming it and those candidates."""
    candidates = symbolic_candidates(prologue)
    unknown = sorted(set(requested) - set(candidates))
    check(
        not unknown,
        lambda: (
            f"jit(dynamic=...): {', '.join(map(repr, unknown))} names no number argument or tensor size of "
            f"{function}; it has {', '.join(candidates) or 'none'}"
        ),
        ValueError,
    )


def to_make_symbolic(misses: Iterable[GuardMiss]) -> set[str]:
    """The number arguments (by input name) and globals or closure variables (by
    `free_values.dynamic_name`) whose baked-in value an entry rejected, and the tensor sizes
    ('x.size(0)', `frontend.size_name`) an entry of the same rank rejected."""
    symbolic = set()
    for m in misses:
        if m.kind in ("value", "free value") and type(m.expected) in _NUMBERS and type(m.actual) is type(m.expected):
            symbolic.add(m.input)
        elif m.kind == "size" and len(m.expected) == len(m.actual):
            symbolic.update(
                size_name(m.input, dim)
                for dim, (expected, actual) in enumerate(zip(m.expected, m.actual))
                if expected is not None and expected != actual
            )
    return symbolic
