"""The prims: the `Prim` enum (`prim.py`), ONE meta table (`meta.py`), and calling prims.

`prims.add(a, b)` and friends (served by this module's `__getattr__`) record a bound symbol when
called on proxies during tracing, and compute the value otherwise (numbers are folded in Python,
tensors run through the implementations in `IMPLS`), so a printed trace runs as plain Python.

Two tables here are filled by the layers above, which import this one (imports point down):
`IMPLS` (prim -> torch implementation) by `compiler.executors.torch`, and `TRACING_REWRITES`
(prim -> rewrite of its arguments while tracing) by the tracer's aliasing model
(`compiler.ops.aliasing`).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

from compiler.core import dtypes, ir, proxies
from compiler.core.errors import check
from compiler.core.ir import BoundSymbol
from compiler.prims.meta import META
from compiler.prims.prim import (
    ATTENTION,
    BINARY,
    COMPARISONS,
    ELEMENTWISE,
    EXACT_OPERANDS,
    FACTORIES,
    GATHERS,
    GRADIENT_MARKERS,
    GUARDS,
    INPLACE,
    KINDS,
    LIBRARY,
    LINALG,
    NUMBER_IMPLS,
    ORDERINGS,
    PROLOGUE_ONLY,
    RANDOM,
    REDUCTIONS,
    RESIZES,
    ROUNDING_DECIDES,
    SCANS,
    SHAPE_OPS,
    SIDE_EFFECTS,
    UNARY,
    UPDATES,
    VIEW_SHAPE_OPS,
    VIEWS,
    Prim,
)

__all__ = [
    "ATTENTION",
    "BINARY",
    "COMPARISONS",
    "ELEMENTWISE",
    "EXACT_OPERANDS",
    "FACTORIES",
    "GATHERS",
    "GRADIENT_MARKERS",
    "GUARDS",
    "IMPLS",
    "INPLACE",
    "KINDS",
    "LIBRARY",
    "LINALG",
    "META",
    "NUMBER_IMPLS",
    "ORDERINGS",
    "PROLOGUE_ONLY",
    "RANDOM",
    "REDUCTIONS",
    "RESIZES",
    "ROUNDING_DECIDES",
    "SCANS",
    "SHAPE_OPS",
    "SIDE_EFFECTS",
    "TRACING_REWRITES",
    "UNARY",
    "UPDATES",
    "VIEWS",
    "VIEW_SHAPE_OPS",
    "Prim",
    "bind",
    "converts_to_integer",
    "evaluate",
    "expanded_unit_dims",
    "views_of",
]

# prim -> callable on real tensors and numbers (the reference semantics); filled by compiler.executors.torch.
IMPLS: dict[Prim, Callable] = {}
# prim -> (args -> args) applied before a prim is recorded while tracing; filled by compiler.ops.aliasing.
# Only reshape has one: the one view prim whose eager counterpart may copy instead of viewing.
TRACING_REWRITES: dict[Prim, Callable[..., tuple]] = {}


# ---------------------------------------------------------------------------------------------
# Calling prims


def bind(prim: Prim, *args: Any) -> Any:
    """Applies `prim`: records it while tracing on proxies, else computes the value right away."""
    context = ir.current()
    if context is None or (prim not in FACTORIES and not _has_proxy(args)):
        return evaluate(prim, args)
    meta = META[prim]
    check(meta is not None, lambda: f"prims.{prim.value} is built by the frontend, not called", TypeError)
    rewrite = TRACING_REWRITES.get(prim)
    if rewrite is not None:
        args = rewrite(*args)
    output = meta(*args)
    context.record(BoundSymbol(prim, args, {}, output))
    return output


def converts_to_integer(bsym: BoundSymbol) -> bool:
    """Whether `bsym` converts to an integer or bool dtype: like the prims of `EXACT_OPERANDS`, its
    result jumps where its operand crosses a value (an integer), so it reads the operand rounded."""
    return bsym.sym is Prim.CONVERT_ELEMENT_TYPE and not bsym.args[1].is_floating_point


def rounded_on_purpose(inputs: Sequence[Any], bsyms: Sequence[BoundSymbol]) -> set[str]:
    """Names of the bf16/fp16 values `bsyms` (reading `inputs`) convert from values computed from
    no bf16/fp16 value (`w.half()` of a float32 `w`: fake quantization, a precision check). A
    fusion executor may hold a bf16 program's values in fp32 between ops, as torch.compile does,
    but these it must round, as the program asked."""
    from_low = {id(p) for p in inputs if _low_precision(p)}
    found = set()
    for b in bsyms:
        derived = any(id(p) in from_low for p in b.inputs)
        if b.sym is Prim.CONVERT_ELEMENT_TYPE and _low_precision(b.output) and not derived:
            found.add(b.output.name)
        if derived or any(_low_precision(p) for p in b.outputs):
            from_low.update(id(p) for p in b.outputs)
    return found


def _low_precision(p: Any) -> bool:
    return isinstance(p, ir.TensorProxy) and dtypes.compute_dtype(p.dtype) != p.dtype


def expanded_unit_dims(bsym: BoundSymbol) -> list[int]:
    """Dims of a broadcast_in_dim's input that have size 1 and are broadcast to another size."""
    a, shape, dims = bsym.args
    return [i for i, d in enumerate(dims) if ir.is_unit(a.shape[i]) and not ir.is_unit(shape[d])]


def views_of(bsyms: Iterable[BoundSymbol]) -> dict[str, ir.Proxy]:
    """The name of each `VIEWS` prim's output -> the tensor it views (its first argument): the IR's
    aliasing rule, as a map to follow from a view back to the memory it lies in."""
    return {b.output.name: b.args[0] for b in bsyms if b.sym in VIEWS and isinstance(b.args[0], ir.Proxy)}


def _has_proxy(args: tuple) -> bool:
    return next(ir.proxies_in(args), None) is not None


def evaluate(prim: Prim, args: tuple) -> Any:
    """The value of `prim` on concrete arguments (numbers in Python, tensors through torch)."""
    if prim in NUMBER_IMPLS and not builtins.any(isinstance(a, torch.Tensor) for a in args):
        return NUMBER_IMPLS[prim](*args)
    check(prim in IMPLS, lambda: f"prims.{prim.value} has no implementation (import compiler first)", RuntimeError)
    return IMPLS[prim](*args)


_BY_NAME = {p.value: p for p in Prim}
_CALLABLES: dict[str, Callable] = {}


def __getattr__(name: str) -> Callable:
    """`prims.add` etc.: a callable that binds the prim of that name."""
    fn = _CALLABLES.get(name)
    if fn is None:
        prim = _BY_NAME.get(name)
        if prim is None:
            raise AttributeError(f"module 'compiler.prims' has no prim named '{name}'")
        fn = _CALLABLES[name] = lambda *args: bind(prim, *args)
        fn.__name__ = name
    return fn


import compiler.prims.meta  # noqa: E402, F401  (fills META)

proxies.HOOKS.bind_prim = lambda name, *args: bind(_BY_NAME[name], *args)
