"""`torch.tensor` and `torch.as_tensor` on Python data: a tensor built in the trace.

Programs build small constants this way (an empty cache buffer, `torch.tensor([], dtype=...)`; a
mask's fill value; a list of positions). The data may hold Python numbers, `NumberProxy` values
and 0-d tensors; its nesting gives the shape, and the dtype is inferred as torch infers it (each
value's type, promoted together). A constant that is one value throughout is one `full`; other
data is its elements laid end to end and reshaped. Tensors in the data are read without their
gradient, as eager copies their values.
"""

from __future__ import annotations

from typing import Any

import torch

from compiler import prims
from compiler.core import dtypes
from compiler.core.errors import called_at, check
from compiler.core.ir import NumberProxy, TensorProxy, canonical_device
from compiler.ops import aliasing, known_values
from compiler.ops.operands import to_dtype
from compiler.ops.registry import register

_NUMBERS = (bool, int, float, NumberProxy)


def _shape_and_leaves(data: Any, name: str) -> tuple[list[int], list[Any]]:
    """The nested sequence's shape and its leaves in row-major order; checks it is rectangular."""
    if isinstance(data, (list, tuple)):
        parts = [_shape_and_leaves(item, name) for item in data]
        inner = parts[0][0] if parts else []
        check(
            all(shape == inner for shape, _ in parts),
            lambda: f"{name}: the data's nested sequences have different lengths ({data!r}){called_at()}",
            ValueError,
        )
        return [len(data), *inner], [leaf for _, leaves in parts for leaf in leaves]
    if isinstance(data, TensorProxy):
        return list(data.shape), [data]
    check(
        isinstance(data, _NUMBERS),
        lambda: (
            f"{name}: expected numbers, 0-d tensors or nested lists of them, got {type(data).__name__}{called_at()}"
        ),
        TypeError,
    )
    return [], [data]


def _inferred_dtype(leaves: list[Any]) -> torch.dtype:
    """torch's inference: each value's own type (a float is the default dtype, an int int64, a
    tensor its dtype), promoted together; no values at all give the default dtype."""
    inferred = None
    for leaf in leaves:
        if isinstance(leaf, TensorProxy):
            dtype = leaf.dtype
        else:
            kind = leaf.python_type if isinstance(leaf, NumberProxy) else type(leaf)
            dtype = {bool: torch.bool, int: torch.int64}.get(kind, torch.get_default_dtype())
        inferred = dtype if inferred is None else torch.promote_types(inferred, dtype)
    return inferred or torch.get_default_dtype()


def _element(leaf: Any, dtype: torch.dtype, device: torch.device) -> TensorProxy:
    """One element as a tensor of shape [1]."""
    if isinstance(leaf, TensorProxy):
        flat = prims.reshape(prims.stop_gradient(leaf), [1])
        return to_dtype(flat, dtype)
    return prims.full(
        [1], dtypes.python_type(dtype)(leaf) if not isinstance(leaf, NumberProxy) else leaf, dtype, device
    )


# NOTE: torch takes a Python type as a dtype (`torch.tensor([-1], dtype=int)` in transformers' caches)
_PYTHON_DTYPES = {bool: torch.bool, int: torch.int64, float: torch.float64, complex: torch.complex128}


def _built(data: Any, dtype: Any, device: Any, name: str) -> TensorProxy:
    shape, leaves = _shape_and_leaves(data, name)
    dtype = dtype or _inferred_dtype(leaves)
    dtype = _PYTHON_DTYPES.get(dtype, dtype)
    device = canonical_device(device)
    if len(leaves) == 1 and isinstance(leaves[0], TensorProxy) and shape == list(leaves[0].shape):
        # NOTE: a copy, as eager's (it warns to use clone().detach()): writes to it reach no one else
        return aliasing.fresh_copy(to_dtype(prims.stop_gradient(leaves[0]), dtype))
    check(
        all(not isinstance(leaf, TensorProxy) or leaf.ndim == 0 for leaf in leaves),
        lambda: f"{name}: tensors inside a list must be 0-d (one element each){called_at()}",
        ValueError,
    )
    concrete = [leaf for leaf in leaves if not isinstance(leaf, (NumberProxy, TensorProxy))]
    # NOTE: compared by repr, not ==: -0.0 == 0.0 and nan != nan, but a `full` must repeat one value
    if len(concrete) == len(leaves) and len({repr(v) for v in concrete}) <= 1:
        value = dtypes.python_type(dtype)(concrete[0]) if concrete else dtypes.python_type(dtype)(0)
        built = prims.full(shape, value, dtype, device)
    else:
        elements = [_element(leaf, dtype, device) for leaf in leaves]
        flat = elements[0] if len(elements) == 1 else prims.cat(elements, 0)
        built = flat if len(shape) == 1 else prims.reshape(flat, shape)
    if len(concrete) == len(leaves):  # Python numbers only: a value known while tracing
        known_values.remember(built, torch.tensor(concrete, dtype=dtype).reshape(shape))
    return built


def _check_kwargs(name: str, requires_grad: bool, pin_memory: bool) -> None:
    check(
        not requires_grad,
        lambda: f"{name}: requires_grad=True is not supported (a leaf created inside the program){called_at()}",
        NotImplementedError,
    )
    check(not pin_memory, lambda: f"{name}: pin_memory is not supported{called_at()}", NotImplementedError)


@register("torch.tensor")
def tensor(
    data: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool = False, pin_memory: bool = False
) -> TensorProxy:
    """torch.tensor: a new tensor holding `data`'s values (see the module docstring)."""
    _check_kwargs("torch.tensor", requires_grad, pin_memory)
    return _built(data, dtype, device, "torch.tensor")


@register("torch.as_tensor")
def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> TensorProxy:
    """torch.as_tensor: a tensor argument itself where dtype and device already match, else a new one."""
    if isinstance(data, TensorProxy):
        same_device = device is None or torch.device(device) == data.device
        if (dtype is None or dtype == data.dtype) and same_device:
            return data
        check(
            same_device,
            lambda: f"torch.as_tensor: moving {data.name} to {device} is not supported{called_at()}",
            NotImplementedError,
        )
        return to_dtype(data, dtype)
    return _built(data, dtype, device, "torch.as_tensor")


@register("torch.scalar_tensor")
def scalar_tensor(
    value: Any, *, dtype: Any = None, device: Any = None, layout: Any = None, requires_grad: bool = False,
    pin_memory: bool = False,
) -> TensorProxy:  # fmt: skip
    """torch.scalar_tensor: a 0-d tensor of the default float dtype unless dtype says otherwise."""
    _check_kwargs("torch.scalar_tensor", requires_grad, pin_memory)
    return _built(value, dtype or torch.get_default_dtype(), device, "torch.scalar_tensor")


@register("torch.Tensor.new_tensor")
def new_tensor(
    self: TensorProxy, data: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool = False,
    layout: Any = None, pin_memory: bool = False,
) -> TensorProxy:  # fmt: skip
    """Tensor.new_tensor: `torch.tensor(data)` with `self`'s dtype and device unless told otherwise."""
    _check_kwargs("Tensor.new_tensor", requires_grad, pin_memory)
    return _built(data, dtype or self.dtype, device if device is not None else self.device, "Tensor.new_tensor")
