"""Training steps: one call runs a function's forward and its backward, timed as one step.

A training-step case's arguments are the function's inputs followed by the cotangent of its output
(the output gradient; None for a scalar loss, as `loss.backward()`). Inputs that require grad are
leaves made with `requires_grad=True` by the case's `make_inputs`.

`training_step` returns `(output, gradients)`: the output (detached) and the gradients of every
input that requires grad, in argument order, from `torch.autograd.grad`. Returning gradients
instead of accumulating them into `.grad` keeps every call identical: no `.grad` grows between
samples, so nothing has to be zeroed outside the timed region, and the check compares the output
AND every gradient with the reference (eager forward + backward, usually in float64).

`forward_of_step` runs only the forward part, with the same inputs under grad mode (so a
variant builds the same autograd graph as in the step); a case declares it as `forward_call` so
that the harness counts the backward's kernels as the step's minus the forward's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def _inputs_requiring_grad(inputs: tuple) -> tuple[torch.Tensor, ...]:
    return tuple(arg for arg in inputs if isinstance(arg, torch.Tensor) and arg.requires_grad)


def training_step(fn: Callable[..., Any], args: tuple) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """Runs `fn(*inputs)` then its backward: (output, gradients of the inputs that require grad).

    `args` is `(*inputs, cotangent)`. Raises NotImplementedError when the output carries no
    autograd graph (a variant that cannot differentiate the function).
    """
    *inputs, cotangent = args
    output = _differentiable_forward(fn, inputs)
    gradients = torch.autograd.grad(output, _inputs_requiring_grad(tuple(inputs)), cotangent)
    return output.detach(), gradients


def _differentiable_forward(fn: Callable[..., Any], inputs: list) -> torch.Tensor:
    """`fn(*inputs)`, which must carry an autograd graph (NotImplementedError otherwise)."""
    output = fn(*inputs)
    if not (isinstance(output, torch.Tensor) and output.requires_grad):
        raise NotImplementedError(
            "the forward returned no autograd graph: training steps are not supported by this variant"
        )
    return output


def forward_of_step(fn: Callable[..., Any], args: tuple) -> Any:
    """Only the forward part of `training_step`: `fn(*inputs)` under grad mode."""
    return fn(*args[:-1])


def backward_of_step(fn: Callable[..., Any], args: tuple) -> Callable[[], tuple[torch.Tensor, ...]]:
    """Only the backward part of `training_step`, to time it alone: runs the forward once, and
    returns a call that computes the same gradients from that output again each time
    (`retain_graph=True`: the forward's saved values stay for the next call)."""
    *inputs, cotangent = args
    output = _differentiable_forward(fn, inputs)
    wrt = _inputs_requiring_grad(tuple(inputs))
    return lambda: torch.autograd.grad(output, wrt, cotangent, retain_graph=True)
