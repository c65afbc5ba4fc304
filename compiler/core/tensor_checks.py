"""One C++ check of many tensors' properties at once: the fast path of the prologue's tensor guards
(compiler/runtime/guard_source.py) and of a fusion's "same layout as the last call" test
(compiler/executors/nvfuser.py).

torch's `TensorGuards` (the check behind torch.compile's guards) keeps each example tensor's exact
type, dispatch keys, dtype, device, requires_grad, sizes and, where asked, strides (not the
tensor itself) and compares tensors with them in C++, at about a third of the cost of reading one
tensor's strides from Python per tensor.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import torch


class TensorChecks:
    """One C++ check of many tensors at once (in a prologue, at least as strict as their
    `check_tensor` lines).

    `check(*tensors)` compares each tensor's exact type, dispatch keys, dtype, device,
    requires_grad and sizes with those of the example tensors; it is False until `learn` has seen
    examples (tensors that passed the exact guards), and stays False where this torch has no such
    check: then the caller's own path decides on every call. It compares the strides of the
    tensors flagged in `exact_strides` too.
    """

    def __init__(self, without_grad: bool = False, exact_strides: Sequence[bool] = ()) -> None:
        self.check: Callable[..., bool] = _never
        self.learned = False
        self.without_grad = without_grad  # learn only from tensors that do not require grad
        self.exact_strides = tuple(exact_strides)

    def learn(self, *tensors: torch.Tensor) -> None:
        """Takes these tensors (which passed the exact guards) as the examples, once (with
        `without_grad`, not from tensors of which one requires grad: it waits for others)."""
        if self.learned or (self.without_grad and any(t.requires_grad for t in tensors)):
            return
        self.learned = True
        try:
            from torch._C._dynamo.guards import TensorGuards

            guards = TensorGuards(
                *tensors,
                dynamic_dims_sizes=[list(t.shape) for t in tensors],
                dynamic_dims_strides=[
                    list(t.stride()) if exact else [None] * t.dim()
                    for t, exact in zip(tensors, self.exact_strides or itertools.repeat(False))
                ],
            )
            if guards.check(*tensors):
                self.check = guards.check
        except Exception:  # NOTE: a torch without this check (or with another signature): lines only
            self.check = _never


def _never(*tensors: Any) -> bool:
    return False
