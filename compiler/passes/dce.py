"""dce: dead-code elimination.

Assumes: a valid trace. Guarantees: every remaining bound symbol has side effects (guards,
write-backs, random draws) or defines a value the output or a later kept bound symbol reads, or a
symbolic size of a kept tensor (autodiff's rules read a forward value's shape: a slice's gradient is
made in the sliced shape, so its sizes must stay defined).

A random draw nobody reads stays: it advances torch's generator as eager's does, so every later
draw (a classifier's dropout after an encoder whose output the head never reads) takes the numbers
eager takes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from compiler.core.ir import BoundSymbol, NumberProxy, TensorProxy, Trace, proxies_in
from compiler.passes import trace_pass
from compiler.prims import RANDOM, SIDE_EFFECTS
from compiler.tracing.frontend import leaves

_KEPT = frozenset(SIDE_EFFECTS) | RANDOM


def has_side_effects(bsym: BoundSymbol) -> bool:
    """True when removing `bsym` would change more than the values it defines (a random draw
    included: it advances the generator)."""
    if not bsym.subsymbols:  # NOTE: a prim, as every line of a flattened trace is, or a prologue check
        return bsym.sym in _KEPT or getattr(bsym.sym, "checks", False)
    return any(leaf.sym in _KEPT for leaf in leaves([bsym]))


@trace_pass("dce")
def dce(trace: Trace) -> Trace:
    """The trace without bound symbols whose outputs nobody reads."""
    return trace.with_bsyms(live_bsyms(trace.bsyms, trace.output))


def live_bsyms(bsyms: Sequence[BoundSymbol], output: Any) -> list[BoundSymbol]:
    """`bsyms` without those whose outputs neither `output` nor a kept one reads, as `dce` keeps
    them (a region's prims, with its outputs: `passes/expanded_inputs.py`)."""
    live = {id(p) for p in proxies_in(output)}
    kept: list[BoundSymbol] = []
    for bsym in reversed(bsyms):
        if has_side_effects(bsym) or any(id(p) in live for p in bsym.outputs):
            kept.append(bsym)
            live.update(id(p) for p in bsym.inputs)
            for p in bsym.outputs:
                if isinstance(p, TensorProxy):
                    live.update(id(s) for s in p.shape if isinstance(s, NumberProxy))
    kept.reverse()
    return kept
