"""The prologue's guards as inline Python: the hot path of every call of a jitted function.

A cache hit runs the entry's prologue, so each guard there is written as one `if ...: raise
GuardFailure` line rather than a call to the torch executor's guard function: a Python call costs
about as much as the check itself. The lines mean exactly what those functions do
(compiler/executors/torch.py: check_tensor, check_type, check_value, check_requires_grad,
unpack_sequence, unpack_dict with no keys); every other prologue prim stays a call. Device checks avoid building
a `torch.device` per call: `is_cpu`, or `get_device()` for a CUDA index.

A run of consecutive `check_tensor` guards on fixed shapes (a list of parameters, of optimizer
states) is first tried as ONE call to torch's C++ tensor check (`TensorChecks`), which costs about
a tenth of the Python lines per tensor; only when it says no (or before it has learned the
tensors' properties, on the entry's first call) do the lines themselves decide.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from compiler.core.errors import GuardFailure
from compiler.core.ir import BoundSymbol, NumberProxy, Proxy, Trace
from compiler.executors import TORCH
from compiler.executors.codegen import Globals, compile_trace, target_source
from compiler.prims import Prim


def _raise(g: Globals, condition: str) -> str:
    return f"if {condition}: raise {g.bind(GuardFailure, 'GuardFailure')}"


def _unpack_sequence(bsym: BoundSymbol, g: Globals) -> list[str] | None:
    seq, length = bsym.args
    target = target_source(bsym.output)
    lines = [_raise(g, f"len({g.source(seq)}) != {length}")]
    return lines + ([f"{target} = {g.source(seq)}"] if target else [])


def _unpack_dict(bsym: BoundSymbol, g: Globals) -> list[str] | None:
    mapping, keys = bsym.args
    return [_raise(g, g.source(mapping))] if not keys else None


def _device_condition(x: str, device: torch.device, g: Globals) -> str:
    if device.type == "cpu":
        return f"{x}.is_cpu"
    if device.type == "cuda" and device.index is not None:
        return f"{x}.get_device() == {device.index} and {x}.is_cuda"
    return f"{x}.device == {g.bind(device, 'device')}"


def _check_tensor(bsym: BoundSymbol, g: Globals) -> list[str] | None:
    proxy, shape, dtype, device = bsym.args
    x = g.source(proxy)
    condition = (
        f"isinstance({x}, {g.bind(torch.Tensor, 'Tensor')}) and {x}.dtype is {g.bind(dtype, 'dtype')} "
        f"and {x}.shape == {g.source(tuple(shape))} and {_device_condition(x, device, g)}"
    )
    return [_raise(g, f"not ({condition})")]


class TensorChecks:
    """One C++ check of many tensors at once, at least as strict as their `check_tensor` lines.

    torch's `TensorGuards` (the check behind torch.compile's guards) compares each tensor's exact
    type, dispatch keys, dtype, device, requires_grad and sizes with those of example tensors.
    `check(*tensors)` is False until `learn` has seen tensors that passed the Python lines, and
    stays False where this torch has no such check: then the lines decide on every call.
    """

    def __init__(self) -> None:
        self.check: Callable[..., bool] = _never
        self.learned = False

    def learn(self, *tensors: torch.Tensor) -> None:
        """Takes these tensors (which passed the exact guards) as the examples, once."""
        if self.learned:
            return
        self.learned = True
        try:
            from torch._C._dynamo.guards import TensorGuards

            guards = TensorGuards(
                *tensors,
                dynamic_dims_sizes=[list(t.shape) for t in tensors],
                dynamic_dims_strides=[[None] * t.dim() for t in tensors],
            )
            if guards.check(*tensors):
                self.check = guards.check
        except Exception:  # NOTE: a torch without this check (or with another signature): lines only
            self.check = _never


def _never(*tensors: Any) -> bool:
    return False


def tensor_check_runs(bsyms: Sequence[BoundSymbol]) -> list[list[BoundSymbol]]:
    """The runs of consecutive `check_tensor` guards whose shapes are all plain integers (a
    symbolic size is checked against other values, which the C++ check cannot do)."""
    runs: list[list[BoundSymbol]] = []
    in_run = False
    for bsym in bsyms:
        static = bsym.sym is Prim.CHECK_TENSOR and not any(isinstance(s, NumberProxy) for s in bsym.args[1])
        if static and not in_run:
            runs.append([])
        if static:
            runs[-1].append(bsym)
        in_run = static
    return runs


def _checked_run(
    heads: Mapping[int, list[BoundSymbol]], members: set[int], bsym: BoundSymbol, g: Globals
) -> list[str] | None:
    """A run's lines at its first guard (the C++ check, the exact lines where it says no), none at
    the others; a `check_tensor` outside every run is its own line."""
    run = heads.get(id(bsym))
    if run is None:
        return [] if id(bsym) in members else _check_tensor(bsym, g)
    checks = g.bind(TensorChecks(), "tensor_checks")
    names = ", ".join(g.source(b.args[0]) for b in run)
    lines = [f"if not {checks}.check({names}):"]
    for b in run:
        lines += [f"  {line}" for line in _check_tensor(b, g) or []]
    return [*lines, f"  {checks}.learn({names})"]


def _check_type(bsym: BoundSymbol, g: Globals) -> list[str] | None:
    x, expected = bsym.args
    return [_raise(g, f"type({g.source(x)}) is not {g.bind(expected, 'type')}")]


def _check_value(bsym: BoundSymbol, g: Globals) -> list[str] | None:
    x, expected = bsym.args
    if not isinstance(x, Proxy):
        return None
    if type(expected) is bool:
        return [_raise(g, f"{x.name} is not {expected}")]
    return [_raise(g, f"type({x.name}) is not {g.bind(type(expected), 'type')} or {x.name} != {g.source(expected)}")]


def _check_requires_grad(bsym: BoundSymbol, g: Globals) -> list[str] | None:
    tensors, flags = bsym.args
    enabled = f"{g.bind(torch.is_grad_enabled, 'is_grad_enabled')}()"
    if not tensors:
        return []
    if True not in flags:  # the common case: no tensor may require grad under grad mode
        any_requires = " or ".join(f"{g.source(t)}.requires_grad" for t in tensors)
        return [_raise(g, f"({any_requires}) and {enabled}")]
    actual = "".join(f"{g.source(t)}.requires_grad, " for t in tensors)
    return [_raise(g, f"not {enabled} or ({actual}) != {g.source(tuple(flags))}")]


INLINE_GUARDS: Mapping[Prim, Callable[[BoundSymbol, Globals], list[str] | None]] = {
    Prim.UNPACK_SEQUENCE: _unpack_sequence,
    Prim.UNPACK_DICT: _unpack_dict,
    Prim.CHECK_TENSOR: _check_tensor,
    Prim.CHECK_TYPE: _check_type,
    Prim.CHECK_VALUE: _check_value,
    Prim.CHECK_REQUIRES_GRAD: _check_requires_grad,
}


def compile_prologue(prologue: Trace) -> Callable[[tuple, dict], Any]:
    """The prologue as a Python function `(args, kwargs) -> computation inputs`, guards inline."""
    runs = tensor_check_runs(prologue.bsyms)
    heads = {id(run[0]): run for run in runs}
    members = {id(b) for run in runs for b in run[1:]}
    inline = {**INLINE_GUARDS, Prim.CHECK_TENSOR: functools.partial(_checked_run, heads, members)}
    return compile_trace(prologue, [TORCH], inline)
