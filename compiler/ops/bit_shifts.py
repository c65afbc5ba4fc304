"""Bit shifts of integer tensors: `x << s`, `x >> s`, torch.bitwise_left_shift / right_shift.

There are no shift prims: a shift is a product or a floor quotient by 2 ** s, computed in int64 and
cast back to the result dtype. Left: the product's low bits are the shifted value (the cast keeps
them, as a shift drops the high ones). Right: the floor quotient is the arithmetic shift eager does
on signed integers (and the logical one on unsigned, which are never negative). A shift amount
that is a tensor raises 2 to it in float64, exact for every integer amount int64 holds as a power
of two (GPTQ-style unpacking, `(packed[..., None] >> shifts) & 0xF`).
"""

from __future__ import annotations

from typing import Any

import torch

from compiler import prims
from compiler.core import dtypes
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy
from compiler.ops.operands import Promotion, broadcast_shapes, broadcast_to, check_no_out, result_dtypes, to_dtype
from compiler.ops.registry import register


def _power_of_two(amount: Any, name: str) -> Any:
    """2 ** amount: an int for an int amount, an int64 tensor for a tensor of amounts."""
    if isinstance(amount, TensorProxy):
        return to_dtype(prims.exp2(to_dtype(amount, torch.float64)), torch.int64)
    check(
        isinstance(amount, int) and 0 <= amount < 63,
        lambda: f"{name}: a shift amount in [0, 63) expected, got {amount!r}{called_at()}",
        NotImplementedError,
    )
    return 2**amount


def _shift(name: str, input: Any, other: Any, left: bool) -> TensorProxy:
    for x in (input, other):
        check(
            isinstance(x, (int, TensorProxy)) and not isinstance(x, bool)
            and not (isinstance(x, TensorProxy) and (dtypes.is_float(x.dtype) or x.dtype == torch.bool)),
            lambda x=x: f"{name} needs integer operands, got {x!r}{called_at()}",
            TypeError,
        )  # fmt: skip
    check(
        isinstance(input, TensorProxy),
        lambda: f"{name}: shifting a Python int by a tensor is not supported{called_at()}",
        NotImplementedError,
    )
    _, result = result_dtypes([input, other], Promotion.DEFAULT)
    shape = broadcast_shapes(*(t.shape for t in (input, other) if isinstance(t, TensorProxy)))
    value = to_dtype(broadcast_to(input, shape), torch.int64)
    power = _power_of_two(broadcast_to(other, shape) if isinstance(other, TensorProxy) else other, name)
    shifted = prims.mul(value, power) if left else prims.floor_divide(value, power)
    return to_dtype(shifted, result)


def _register(name: str, left: bool, *dunders: str) -> None:
    @register(f"torch.{name}", f"torch.Tensor.{name}", *(f"torch.Tensor.{d}" for d in dunders))
    def op(input: Any, other: Any, *, out: Any = None) -> TensorProxy:
        check_no_out(f"torch.{name}", out)
        return _shift(name, input, other, left)


_register("bitwise_left_shift", True, "__lshift__")
_register("bitwise_right_shift", False, "__rshift__")
