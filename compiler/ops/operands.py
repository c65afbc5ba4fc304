"""Making operands agree: dim canonicalisation, broadcasting and torch's type promotion.

Every op that combines tensors calls these helpers; they emit explicit `broadcast_in_dim` and
`convert_element_type` prims so that the prims themselves never broadcast or promote.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Any

import torch

from compiler import prims
from compiler.core import dtypes
from compiler.core.errors import called_at, check
from compiler.core.ir import NumberProxy, TensorProxy, same_size

Number = (int, float, bool, NumberProxy)


def canonical_dim(dim: Any, ndim: int, what: str = "dim") -> int:
    """`dim` as a non-negative int for a tensor of rank `ndim` (0-d tensors accept 0 and -1)."""
    dim = int(dim) if isinstance(dim, NumberProxy) else dim
    rank = max(ndim, 1)
    check(
        isinstance(dim, int) and -rank <= dim < rank,
        lambda: f"{what} {dim!r} is out of range: expected an int in [{-rank}, {rank - 1}]{called_at()}",
        IndexError,
    )
    return dim % rank


def canonical_new_dim(dim: Any, ndim: int) -> int:
    """Where a new dim goes in the result of inserting one into a tensor of rank `ndim` (unsqueeze,
    stack): `dim` in [-ndim - 1, ndim], as a non-negative int."""
    dim = int(dim) if isinstance(dim, NumberProxy) else dim
    check(
        isinstance(dim, int) and -ndim - 1 <= dim <= ndim,
        lambda: (
            f"dim {dim!r} is out of range for inserting a dim into a tensor of rank {ndim} "
            f"(expected an int in [{-ndim - 1}, {ndim}]){called_at()}"
        ),
        IndexError,
    )
    return dim % (ndim + 1)


def canonical_dims(dims: Any, ndim: int) -> tuple[int, ...]:
    """Sorted non-negative dims; None or () means every dim (as torch's reductions do)."""
    if dims is None or (isinstance(dims, (tuple, list)) and len(dims) == 0):
        return tuple(range(ndim))
    if not isinstance(dims, (tuple, list)):
        dims = (dims,)
    result = sorted({canonical_dim(d, ndim) for d in dims})
    return tuple(d for d in result if d < ndim) if ndim else ()


def is_number(x: Any) -> bool:
    """True for Python numbers and NumberProxy scalars."""
    return isinstance(x, Number)


def number_type(x: Any) -> type:
    """The Python type of a number or NumberProxy."""
    return x.python_type if isinstance(x, NumberProxy) else type(x)


def broadcast_shapes(*shapes: Sequence) -> tuple:
    """torch's broadcast of shapes; comparisons of symbolic sizes record guards."""
    ndim = max((len(s) for s in shapes), default=0)
    result = []
    for i in range(-ndim, 0):
        size: Any = 1
        for shape in shapes:
            if len(shape) < -i:
                continue
            s = shape[i]
            if s is size or (isinstance(s, int) and s == 1):
                continue
            if isinstance(size, int) and size == 1:
                size = s
                continue
            check(
                same_size(s, size) or same_size(s, 1),
                lambda s=s, size=size: (
                    f"shapes {', '.join(str(tuple(sh)) for sh in shapes)} do not "
                    f"broadcast: size {s} against {size}{called_at()}"
                ),
                ValueError,
            )
        result.append(size)
    return tuple(result)


def broadcast_to(t: TensorProxy, shape: Sequence) -> TensorProxy:
    """`t` expanded to `shape` (a no-op when it already has it)."""
    if len(t.shape) == len(shape) and all(a is b or (type(a) is int and a == b) for a, b in zip(t.shape, shape)):
        return t
    offset = len(shape) - t.ndim
    check(offset >= 0, lambda: f"cannot broadcast {t.name} of shape {t.shape} to {tuple(shape)}", ValueError)
    return prims.broadcast_in_dim(t, list(shape), list(range(offset, len(shape))))


def to_dtype(x: Any, dtype: torch.dtype) -> Any:
    """`x` converted to `dtype`: tensors (and NumberProxy scalars) through a prim when needed.

    Python constants are left alone: torch and nvFuser treat them as weakly typed scalars.
    """
    if isinstance(x, TensorProxy):
        return x if x.dtype == dtype else prims.convert_element_type(x, dtype)
    target = dtypes.python_type(dtype)
    if isinstance(x, NumberProxy) and x.python_type is not target:
        return prims.convert_element_type(x, target)
    return x


class Promotion(enum.Enum):
    """How an elementwise op's result dtype follows from its operands (torch's kinds)."""

    DEFAULT = "default"  # the promoted dtype
    INT_TO_FLOAT = "int_to_float"  # integers and bools give the default float (div, exp, sqrt, ...)
    ALWAYS_BOOL = "always_bool"  # comparisons: compute in the promoted dtype, return bool
    BOOL_TO_LONG = "bool_to_long"  # bool gives int64 (abs of bool is an error in torch; sum, ...)


def result_dtypes(args: Sequence, promotion: Promotion) -> tuple[torch.dtype, torch.dtype]:
    """(compute dtype, result dtype) of an elementwise op over `args` (tensors and numbers)."""
    dimensioned = [a.dtype for a in args if isinstance(a, TensorProxy) and a.ndim > 0]
    zero_dim = [a.dtype for a in args if isinstance(a, TensorProxy) and a.ndim == 0]
    numbers = [number_type(a) for a in args if is_number(a)]
    promoted = dtypes.promote(dimensioned, zero_dim, numbers)
    if promotion is Promotion.INT_TO_FLOAT and dtypes.category(promoted) < 2:
        promoted = torch.get_default_dtype()
    if promotion is Promotion.BOOL_TO_LONG and promoted == torch.bool:
        promoted = torch.int64
    compute = dtypes.compute_dtype(promoted)
    return compute, torch.bool if promotion is Promotion.ALWAYS_BOOL else promoted


def elementwise(
    prim_fn: Callable,
    *args: Any,
    promotion: Promotion = Promotion.DEFAULT,
    compute: torch.dtype | None = None,
) -> Any:
    """Broadcasts and promotes `args`, applies `prim_fn` in the compute dtype, casts the result.

    Numbers stay scalars (NumberProxy included); only tensors are broadcast. With no tensor
    among `args` the prim simply applies to the numbers.
    """
    tensors = [a for a in args if isinstance(a, TensorProxy)]
    for a in args:
        check(
            isinstance(a, TensorProxy) or is_number(a),
            lambda a=a: f"expected a tensor or a number, got {type(a).__name__} {a!r}{called_at()}",
            TypeError,
        )
    if not tensors:
        return prim_fn(*args)
    args = on_one_device(args)
    compute_dtype, result_dtype = result_dtypes(args, promotion)
    if compute is not None:
        compute_dtype = compute
    shape = broadcast_shapes(*(t.shape for t in tensors))
    operands = [to_dtype(broadcast_to(a, shape) if isinstance(a, TensorProxy) else a, compute_dtype) for a in args]
    out = prim_fn(*operands)
    return to_dtype(out, result_dtype) if out.dtype != result_dtype else out


def on_one_device(args: Sequence[Any]) -> list[Any]:
    """`args` with their tensors on one device, as eager combines them: a 0-d CPU tensor used with
    tensors on another device is moved to theirs (`prims.device_put`); any other mix raises."""
    devices = {a.device for a in args if isinstance(a, TensorProxy)}
    if len(devices) < 2:
        return list(args)
    others = {d for d in devices if d.type != "cpu"}
    movable = all(a.ndim == 0 for a in args if isinstance(a, TensorProxy) and a.device.type == "cpu")
    check(
        len(others) == 1 and movable,
        lambda: (
            "expected all tensors on one device (a 0-d CPU tensor may join tensors on another), got "
            + ", ".join(f"{a.name} {list(a.shape)} on {a.device}" for a in args if isinstance(a, TensorProxy))
            + called_at()
        ),
        ValueError,
    )
    (target,) = others
    return [prims.device_put(a, target) if isinstance(a, TensorProxy) and a.device != target else a for a in args]


def check_no_out(op: str, out: Any) -> None:
    """Rejects `out=` where the op does not support it yet."""
    check(out is None, lambda: f"{op}: out= is not supported{called_at()}", NotImplementedError)


def insert_dim(input: TensorProxy, dim: int) -> TensorProxy:
    """`input` with a size-1 dim inserted at `dim` (already canonical: 0 <= dim <= input.ndim)."""
    shape = list(input.shape)
    shape.insert(dim, 1)
    return prims.broadcast_in_dim(input, shape, [i for i in range(input.ndim + 1) if i != dim])
