"""Writes into tensors while tracing: the in-place write behind in-place ops and `out=` arguments.

`write(target, value)` checks what eager checks (shape, castability, writability through views)
and records `prims.copy_(target, value)`, which overwrites `target` and every view of it;
`passes/functionalize.py` turns those writes into pure updates plus write-backs.
"""

from __future__ import annotations

from typing import Any

import torch

from compiler import prims
from compiler.core import dtypes
from compiler.core.errors import called_at, check
from compiler.core.ir import NumberProxy, TensorProxy, same_size
from compiler.ops import aliasing
from compiler.ops.operands import broadcast_shapes, broadcast_to, to_dtype
from compiler.ops.program_grad import grad_off_by_program


def same_shape(a: tuple, b: tuple) -> bool:
    """Whether two shapes are equal (comparing symbolic sizes records guards)."""
    return len(a) == len(b) and all(map(same_size, a, b))


def _scalar(value: Any, dtype: torch.dtype) -> Any:
    """A number (or NumberProxy) as the Python type of `dtype`, as torch casts a fill value."""
    if isinstance(value, NumberProxy):
        return to_dtype(value, dtype)
    return dtypes.python_type(dtype)(value)


def write(target: Any, value: Any, what: str, *, broadcast: bool = False, any_cast: bool = False) -> TensorProxy:
    """Records that `target`'s contents become `value` (a tensor or a number); returns `target`.

    Without `broadcast`, `value` must have exactly `target`'s shape; without `any_cast`, its dtype
    must cast to `target`'s under torch's rules for in-place results.
    """
    check(
        isinstance(target, TensorProxy),
        lambda: f"{what}: cannot write into {type(target).__name__} {target!r}{called_at()}",
        TypeError,
    )
    if not isinstance(value, TensorProxy):
        check(
            isinstance(value, (int, float, bool, NumberProxy)),
            lambda: f"{what}: expected a tensor or a number to write, got {type(value).__name__}{called_at()}",
            TypeError,
        )
        value = prims.full(list(target.shape), _scalar(value, target.dtype), target.dtype, target.device)
    check(
        value.device == target.device,
        lambda: f"{what}: cannot write a tensor on {value.device} into one on {target.device}{called_at()}",
        RuntimeError,
    )
    if broadcast:
        shape = broadcast_shapes(target.shape, value.shape)
        check(
            same_shape(shape, target.shape),
            lambda: f"{what}: a value of shape {value.shape} cannot be broadcast to {target.shape}{called_at()}",
            RuntimeError,
        )
        value = broadcast_to(value, target.shape)
    check(
        same_shape(value.shape, target.shape),
        lambda: (
            f"{what}: output with shape {target.shape} doesn't match the broadcast shape {value.shape}; "
            f"in-place operations do not resize{called_at()}"
        ),
        RuntimeError,
    )
    check(
        any_cast or torch.can_cast(value.dtype, target.dtype),
        lambda: (
            f"{what}: result type {value.dtype} can't be cast to the desired output type {target.dtype}{called_at()}"
        ),
        RuntimeError,
    )
    aliasing.check_writable(target, what)
    if grad_off_by_program():  # NOTE: autograd does not record it: the target keeps its history
        prims.copy_(target, to_dtype(value, target.dtype), True)
    else:
        prims.copy_(target, to_dtype(value, target.dtype))
    return target


def write_out(out: Any, result: Any, what: str) -> Any:
    """The `out=` write: `result` (a tensor or a tuple of them) into `out` (the same structure)."""
    if isinstance(result, (tuple, list)):
        check(
            isinstance(out, (tuple, list)) and len(out) == len(result),
            lambda: f"{what}: out= must be a tuple of {len(result)} tensors{called_at()}",
            TypeError,
        )
        for o, r in zip(out, result):
            write(o, r, what)
        return out
    return write(out, result, what)
