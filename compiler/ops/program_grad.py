"""Whether the traced program has turned grad off where tracing is now (its `torch.no_grad()`).

What an op makes there is put behind `prims.stop_gradient` (ops/registry.py), and a write made
there is recorded as one autograd does not see (ops/writes.py): eager's autograd records neither.
Grad off inside a custom `torch.autograd.Function`'s forward is torch's doing, not the program's:
the compiler inlines that forward and differentiates it like any other code.
"""

from __future__ import annotations

import sys

import torch

from compiler.core import ir

# `torch.autograd.Function.apply`'s code: every custom Function's forward runs below its frame
# (Bloom's GELU as written, or dynamo's `autograd_function_apply` of one)
_FUNCTION_APPLY = torch.autograd.Function.apply.__func__.__code__


def grad_off_by_program() -> bool:
    """Whether grad was on when tracing started and the program has turned it off here."""
    context = ir.current()
    if context is None or not context.grad_at_start or torch.is_grad_enabled():
        return False
    return not _in_function_forward()


def _in_function_forward() -> bool:
    """Whether a custom `torch.autograd.Function`'s forward is running (torch runs it with grad off)."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code is _FUNCTION_APPLY:
            return True
        frame = frame.f_back
    return False
