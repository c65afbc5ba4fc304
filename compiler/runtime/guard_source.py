"""The prologue's guards as inline Python: the hot path of every call of a jitted function.

A cache hit runs the entry's prologue, so each guard there is written as one `if ...: raise
GuardFailure` line rather than a call to the torch executor's guard function: a Python call costs
about as much as the check itself. The lines mean exactly what those functions do
(compiler/executors/torch.py: check_tensor, check_type, check_value, check_requires_grad,
unpack_sequence, unpack_dict with no keys); every other prologue prim stays a call. Device checks avoid building
a `torch.device` per call: `is_cpu`, or `get_device()` for a CUDA index.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from compiler.core.errors import GuardFailure
from compiler.core.ir import BoundSymbol, Proxy, Trace
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
    return compile_trace(prologue, [TORCH], INLINE_GUARDS)
