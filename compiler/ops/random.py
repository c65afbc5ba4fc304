"""Random ops: dropout, drawing from torch's default generator as eager PyTorch does.

`prims.dropout_noise` makes the tensor eager dropout multiplies by (0 with probability p, else
1 / (1 - p)) with the same generator calls, so under the same seed a compiled program drops the
same elements as eager. In eval mode, or with p = 0, dropout is the identity (the input itself,
as in eager); with p = 1 it multiplies by zero.
"""

from __future__ import annotations

from typing import Any

from compiler import prims
from compiler.core import dtypes
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy
from compiler.ops.operands import elementwise
from compiler.ops.registry import register


@register("torch.nn.functional.dropout", "torch.dropout")
def dropout(input: TensorProxy, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:
    """input * noise in training mode, where noise is 0 with probability p and 1 / (1 - p) otherwise."""
    check(
        isinstance(p, (int, float)) and 0.0 <= p <= 1.0,
        lambda: f"dropout: p must be a number in [0, 1], got {p!r}{called_at()}",
        ValueError,
    )
    check(
        isinstance(input, TensorProxy) and dtypes.is_float(input.dtype),
        lambda: f"dropout: expected a floating point tensor, got {getattr(input, 'dtype', input)!r}{called_at()}",
        TypeError,
    )
    check(not inplace, lambda: f"dropout: inplace=True is not supported{called_at()}", NotImplementedError)
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return elementwise(prims.mul, input, 0.0)
    noise = prims.dropout_noise(list(input.shape), float(p), input.dtype, input.device)
    return prims.mul(input, noise)
