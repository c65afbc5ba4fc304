"""A training step as a case's `call`: forward through the (compiled) model, backward, AdamW step
(`train_step`), or forward and backward only, returning the loss and the gradients (`forward_backward`).

A training case's inputs are `(model, *batch, optimizer, parameters)` where `parameters` are the
model's parameters (a list, declared as the mutated argument: the harness restores them between
repeats and checks them after the first step). During the step the model computes with the
tensors in `parameters`: the model's own for every variant, and the harness's float64 copies for
the reference, which then steps an AdamW of its own over them, so the reference's updated
parameters are what each variant's first step must give.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

LEARNING_RATE = 1e-4


def train_inputs(model: nn.Module, *batch: torch.Tensor) -> tuple:
    """(model, *batch, AdamW over the model's parameters, the parameters), for `train_step`."""
    parameters = list(model.parameters())
    optimizer = torch.optim.AdamW(parameters, lr=LEARNING_RATE, foreach=True)
    return (model, *batch, optimizer, parameters)


Slot = tuple[nn.Module, str, torch.Tensor, int]  # module, name, its own parameter, index in model.parameters()
# model -> (its number of parameters, its slots with the modules held weakly: a slot of the model
# itself must not keep the model, the dictionary's key, alive)
_SLOTS: weakref.WeakKeyDictionary[nn.Module, tuple[int, list[tuple[weakref.ref, str, torch.Tensor, int]]]] = (
    weakref.WeakKeyDictionary()
)


def _slots(model: nn.Module, count: int) -> list[Slot]:
    """The model's parameter slots (a tied parameter's slots share an index), found once per model
    and again when a slot holds another parameter than it did or `count` (the parameters given)
    changed: walking the modules every step costs host time that is the same for every variant,
    and large next to a small model's step, so it would blur the comparison."""
    found, held = _SLOTS.get(model, (-1, []))
    slots = [(module(), name, p, i) for module, name, p, i in held]
    if found != count or any(m is None or m._parameters.get(name) is not p for m, name, p, _ in slots):
        by_id = {id(p): i for i, p in enumerate(model.parameters())}
        slots = [
            (m, name, p, by_id[id(p)]) for m in model.modules() for name, p in m._parameters.items() if p is not None
        ]
        _SLOTS[model] = (len(by_id), [(weakref.ref(m), name, p, i) for m, name, p, i in slots])
    return slots


@contextlib.contextmanager
def _computing_with(model: nn.Module, parameters: list[torch.Tensor]) -> Iterator[None]:
    slots = _slots(model, len(parameters))
    try:
        for m, name, _, i in slots:
            m._parameters[name] = parameters[i]
        yield
    finally:
        for m, name, p, _ in slots:
            m._parameters[name] = p


def _loss(output: Any) -> torch.Tensor:
    if isinstance(output, dict) or hasattr(output, "loss"):
        return output["loss"]
    return output.float().square().mean()


def forward_backward(fn: Callable[..., Any], args: tuple) -> tuple[torch.Tensor, tuple]:
    """(loss, gradients of the parameters) of `fn(model, *batch)`, for inputs `(model, *batch, parameters)`."""
    model, *batch, parameters = args
    with _computing_with(model, parameters):
        loss = _loss(fn(model, *batch))
        gradients = torch.autograd.grad(loss, parameters)
    return loss.detach(), gradients


def forward_loss(fn: Callable[..., Any], args: tuple) -> torch.Tensor:
    """Only the forward part of `forward_backward` (a case's `forward_call`): the loss, under grad mode."""
    model, *batch, parameters = args
    with _computing_with(model, parameters):
        return _loss(fn(model, *batch))


def train_step(fn: Callable[..., Any], args: tuple) -> torch.Tensor:
    """One step: loss = fn(model, *batch)['loss'] (or the output's mean square), backward, AdamW."""
    model, *batch, optimizer, parameters = args
    if optimizer.param_groups[0]["params"][0] is not parameters[0]:
        optimizer = torch.optim.AdamW(parameters, lr=LEARNING_RATE, foreach=True)  # the reference's copies
    with _computing_with(model, parameters):
        loss = _loss(fn(model, *batch))
        loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()
