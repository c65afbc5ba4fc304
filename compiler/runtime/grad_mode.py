"""Grad mode at compile time: which computation inputs take part in autograd, guarded per entry.

An entry compiled for inputs that require grad (under grad mode) runs a forward and a backward;
one compiled without runs the plain computation. The prologue's `check_requires_grad` guard keeps
the two apart: a call matches an entry only when grad mode and each tensor's `requires_grad` give
the same flags as when the entry was compiled.
"""

from __future__ import annotations

import torch

from compiler.core.errors import check
from compiler.core.ir import BoundSymbol, TensorProxy, Trace
from compiler.prims import Prim
from compiler.tracing.interpreter import eval_trace


def grad_guard(prologue: Trace, args: tuple, kwargs: dict) -> tuple[Trace, tuple[bool, ...], tuple[bool, ...]]:
    """(the prologue with a `check_requires_grad` guard, per computation input: whether it
    requires grad, whether it is an autograd leaf)."""
    values = eval_trace(prologue, args, kwargs)
    enabled = torch.is_grad_enabled()
    requires_grad = tuple(enabled and isinstance(v, torch.Tensor) and v.requires_grad for v in values)
    leaf = tuple(isinstance(v, torch.Tensor) and v.is_leaf for v in values)
    tensors = [(p, r) for p, r in zip(prologue.output, requires_grad) if isinstance(p, TensorProxy)]
    guard = BoundSymbol(
        Prim.CHECK_REQUIRES_GRAD, (tuple(p for p, _ in tensors), tuple(r for _, r in tensors)), {}, None
    )
    return prologue.with_bsyms([*prologue.bsyms, guard]), requires_grad, leaf


def check_no_write_into_grad_inputs(
    trace: Trace, requires_grad: tuple[bool, ...], leaf: tuple[bool, ...], live: set[str]
) -> None:
    """Raises as eager does when the (functionalized) trace writes a value that carries a gradient
    (one of `live`, `passes.autodiff.differentiable_values`) into an input that requires grad. A
    write autograd does not record (under `torch.no_grad()`: an SGD step, an EMA, weight clipping)
    is allowed, as in eager, next to returned values that carry a gradient: functionalize has
    marked the input's later reads as reads of the input itself (`prims.updated_without_grad`), so
    their gradients reach it, and the values the backward reads from before the write are saved as
    copies (passes/split_backward.py)."""
    flags = {p.name: (r, l) for p, r, l in zip(trace.inputs, requires_grad, leaf)}
    for bsym in trace.bsyms:
        if bsym.sym is not Prim.COPY_TO:
            continue
        value, buffer = bsym.args[0], bsym.args[1]
        requires, is_leaf = flags.get(buffer.name, (False, False))
        if not requires or value.name not in live:
            continue
        check(
            not is_leaf,
            lambda: "a leaf Variable that requires grad is being used in an in-place operation.",
            RuntimeError,
        )
        raise NotImplementedError(
            f"the compiled function writes in place into its input {buffer.name}, which requires grad; "
            "in-place updates of inputs that take part in autograd are not supported (clone it first)"
        )


def differentiable_writes(trace: Trace, live: set[str]) -> list[tuple[int, TensorProxy]]:
    """(input position, value) of each write the (functionalized) trace makes of a value that
    depends on an input requiring grad (one of `live`) into an input that does not (eager's `buffer.mul_(0.9).add_(x)`,
    `buffer[:, i:] = f(weight)`).

    NOTE: a write-back runs inside the compiled forward, which autograd does not record: the input
    would hold the value without its history, and its later readers (the rest of the program, after
    a dynamo graph break the next piece) would get no gradient through it. The caller returns these
    values too and writes them again under autograd (`CompiledAutograd`), as eager's write records.
    """
    position = {p.name: i for i, p in enumerate(trace.inputs)}
    writes = []
    for bsym in trace.bsyms:
        if bsym.sym is not Prim.COPY_TO:
            continue
        value, buffer = bsym.args[0], bsym.args[1]
        if buffer.name in position and isinstance(value, TensorProxy) and value.name in live:
            writes.append((position[buffer.name], value))
    return writes


def returning_written_values(trace: Trace, writes: list[tuple[int, TensorProxy]]) -> Trace:
    """`trace` returning `(its output, (a copy of each written value, in `writes`' order))`.

    NOTE: a copy, made before the write-back: the value itself is handed to its buffer, and a value
    handed to a buffer is read by nothing after (tracing/check_writebacks.py's contract)."""
    names = set(trace.names())
    written = {(value.name, trace.inputs[i].name) for i, value in writes}
    copies = []
    bsyms = []
    for bsym in trace.bsyms:
        if bsym.sym is Prim.COPY_TO and (bsym.args[0].name, bsym.args[1].name) in written:
            value = bsym.args[0]
            name = next(
                f"{value.name}_written{n}" for n in range(len(names) + 1) if f"{value.name}_written{n}" not in names
            )
            names.add(name)
            copy = TensorProxy(value.shape, value.dtype, value.device, name=name)
            bsyms.append(BoundSymbol(Prim.MUL, (value, 1.0), {}, copy))
            copies.append(copy)
        bsyms.append(bsym)
    return trace.with_bsyms(bsyms, output=(trace.output, tuple(copies)))
