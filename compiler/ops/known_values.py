"""Tensors whose values are known while tracing: `torch.tensor` of Python numbers (DeBERTa's attention
span, `torch.tensor(min(query_length, max_positions))`) and what out-of-place ops compute from such
tensors alone, evaluated by torch as the program is traced.

A program may use one as a Python number (a slice bound, an `if`, `.item()`): the value is a
constant of the trace (it depends on no input, or on sizes the prologue guards), so it needs no
guard of its own (`core.proxies.HOOKS.known_value`). Only small tensors are kept; a write into one,
or into any view of what it views, forgets it.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from typing import Any

import torch

from compiler import prims
from compiler.core import ir, proxies
from compiler.core.ir import BoundSymbol, TensorProxy, TraceContext
from compiler.ops import aliasing

_LIMIT = 64  # elements: positions, spans, scales; larger constants are not worth evaluating twice
_KNOWN: weakref.WeakKeyDictionary[TraceContext, dict[int, tuple[TensorProxy, torch.Tensor]]] = (
    weakref.WeakKeyDictionary()
)


def _table() -> dict[int, tuple[TensorProxy, torch.Tensor]] | None:
    context = ir.current()
    return None if context is None else _KNOWN.setdefault(context, {})


def remember(proxy: TensorProxy, value: torch.Tensor) -> None:
    """`proxy`'s value is `value` (a small tensor computed from Python numbers alone)."""
    table = _table()
    if table is not None and value.numel() <= _LIMIT:
        table[id(proxy)] = (proxy, value)


def known_value(proxy: TensorProxy) -> torch.Tensor | None:
    """The value of `proxy` if it is known while tracing, else None."""
    table = _table()
    entry = None if table is None else table.get(id(proxy))
    return None if entry is None or entry[0] is not proxy else entry[1]


def after_op(fn: Callable, args: tuple, kwargs: dict, output: Any, recorded: list[BoundSymbol]) -> None:
    """Keeps the values of `fn`'s new outputs when every value it read is a known tensor (and it
    draws no random numbers); an op that writes into a tensor forgets the values it may change."""
    table = _table()
    if not table:
        return
    written = write_targets(recorded)
    if written:
        # NOTE: a write into a kept tensor, or through any view of it, makes its value stale
        context = ir.current()
        roots = {id(aliasing.root(context, t)) for t in written}
        for key, (proxy, _) in list(table.items()):
            if id(aliasing.root(context, proxy)) in roots:
                del table[key]
        return
    read = list(ir.proxies_in((args, kwargs)))
    new = {id(p) for bsym in recorded for p in ir.defined_proxies(bsym)}
    outputs = list(ir.proxies_in(output))
    if not outputs or any(id(p) not in new for p in outputs):
        return
    if not read or any(not isinstance(p, TensorProxy) or known_value(p) is None for p in read):
        return
    if any(not isinstance(p, TensorProxy) or not _small(p) for p in outputs) or _draws(recorded):
        return
    try:
        with torch._C.DisableTorchFunction():  # NOTE: the tracing mode would take real tensors for stray ones
            values = fn(*_substituted(args), **_substituted(kwargs))
    except Exception:  # NOTE: the op was traced; where eager cannot evaluate it here, its value stays unknown
        return
    flat = [v for v in _leaves(values) if isinstance(v, torch.Tensor)]
    if len(flat) == len(outputs):
        for proxy, value in zip(outputs, flat):
            remember(proxy, value)


def _small(p: TensorProxy) -> bool:
    return all(isinstance(size, int) for size in p.shape) and math.prod(p.shape) <= _LIMIT


def write_targets(recorded: list[BoundSymbol]) -> list[TensorProxy]:
    """The tensors these bound symbols (and those inside them) write into: in-place ops record
    each write as a `copy_` prim."""
    targets = []
    for bsym in recorded:
        if bsym.sym in prims.INPLACE:
            targets.append(bsym.args[0])
        targets += write_targets(list(bsym.subsymbols))
    return targets


def _draws(recorded: list[BoundSymbol]) -> bool:
    """Whether the op draws random numbers (evaluating it again would draw them twice)."""
    return any(bsym.sym in prims.RANDOM or _draws(list(bsym.subsymbols)) for bsym in recorded)


def _substituted(tree: Any) -> Any:
    if isinstance(tree, TensorProxy):
        return known_value(tree)
    if isinstance(tree, (tuple, list)):
        return type(tree)(_substituted(x) for x in tree)
    if isinstance(tree, dict):
        return {k: _substituted(v) for k, v in tree.items()}
    return tree


def _leaves(tree: Any) -> list[Any]:
    if isinstance(tree, (tuple, list)):
        return [leaf for x in tree for leaf in _leaves(x)]
    return [tree]


proxies.HOOKS.known_value = known_value
