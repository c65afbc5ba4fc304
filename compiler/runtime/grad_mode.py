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
from compiler.passes.autodiff import differentiable_values
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


def check_no_write_into_grad_inputs(trace: Trace, requires_grad: tuple[bool, ...], leaf: tuple[bool, ...]) -> None:
    """Raises as eager does when the (functionalized) trace writes into an input that requires grad."""
    flags = {p.name: (r, l) for p, r, l in zip(trace.inputs, requires_grad, leaf)}
    for bsym in trace.bsyms:
        if bsym.sym is not Prim.COPY_TO:
            continue
        buffer = bsym.args[1]
        requires, is_leaf = flags.get(buffer.name, (False, False))
        check(
            not (requires and is_leaf),
            lambda: "a leaf Variable that requires grad is being used in an in-place operation.",
            RuntimeError,
        )
        check(
            not requires,
            lambda buffer=buffer: (
                f"the compiled function writes in place into its input {buffer.name}, which requires grad; "
                "in-place updates of inputs that take part in autograd are not supported (clone it first)"
            ),
            NotImplementedError,
        )


def check_no_differentiable_write_into_inputs(trace: Trace, requires_grad: tuple[bool, ...]) -> None:
    """Raises NotImplementedError where the (functionalized) trace writes a value that depends on
    an input requiring grad into an input that does not (eager's `buffer[:, i:] = f(weight)`).

    NOTE: the write-back runs inside the compiled forward, which autograd does not record, so the
    input would hold the value without its history: later readers of the input (the rest of the
    program, after a dynamo graph break the next piece) would get no gradient through it. Refused
    instead (the dynamo backend then runs the piece eagerly).
    """
    live = differentiable_values(trace, requires_grad)
    inputs = {p.name for p in trace.inputs}
    for bsym in trace.bsyms:
        if bsym.sym is not Prim.COPY_TO:
            continue
        value, buffer = bsym.args[0], bsym.args[1]
        check(
            not (buffer.name in inputs and isinstance(value, TensorProxy) and value.name in live),
            lambda buffer=buffer: (
                f"the compiled function writes a value that depends on an input requiring grad into its input "
                f"{buffer.name}, which does not require grad: autograd would not record the write, and later "
                "readers of that tensor would get no gradient through it (write into a tensor created inside "
                "the function, or return the value)"
            ),
            NotImplementedError,
        )
