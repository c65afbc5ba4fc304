"""Type conversion ops: Tensor.to / type / float / double / half / bfloat16 / int / long / bool.

Conversions that change nothing return the input itself (as torch does); a device move is a copy
(`prims.device_put`), which torch runs outside any fusion.
"""

from __future__ import annotations

from typing import Any

import torch

from compiler import prims
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy, canonical_device
from compiler.ops.aliasing import fresh_copy
from compiler.ops.operands import to_dtype
from compiler.ops.registry import register


def _parse_to(args: tuple, kwargs: dict) -> tuple[torch.dtype | None, torch.device | None]:
    dtype = kwargs.get("dtype")
    device = kwargs.get("device")
    for a in args:
        if isinstance(a, torch.dtype):
            dtype = a
        elif isinstance(a, (str, torch.device)):
            device = torch.device(a)
        elif isinstance(a, TensorProxy):
            dtype, device = a.dtype, a.device
    return dtype, torch.device(device) if device is not None else None


def to_device(input: TensorProxy, device: Any) -> TensorProxy:
    """`input` on `device`: itself when it is there already, else a copy (`prims.device_put`)."""
    device = torch.device(device)
    same = device.type == input.device.type and (device.index is None or device.index == input.device.index)
    return input if same else prims.device_put(input, canonical_device(device))


@register("torch.Tensor.to")
def to(input: TensorProxy, *args: Any, **kwargs: Any) -> Any:
    dtype, device = _parse_to(args, kwargs)
    moved = to_device(input, device) if device is not None else input
    if kwargs.get("copy") and moved is input:
        if dtype in (None, input.dtype):
            return fresh_copy(input)
        return prims.convert_element_type(input, dtype)
    return to_dtype(moved, dtype) if dtype is not None else moved


@register("torch.Tensor.cpu")
def cpu(input: TensorProxy, memory_format: Any = None) -> Any:
    return to_device(input, "cpu")


@register("torch.Tensor.cuda")
def cuda(input: TensorProxy, device: Any = None, non_blocking: bool = False, memory_format: Any = None) -> Any:
    if device is None or isinstance(device, int):
        return to_device(input, torch.device("cuda", device))
    return to_device(input, device)


# NOTE: the legacy tensor type names, as eager's `Tensor.type()` gives them
_TYPE_NAMES = {
    torch.float32: "FloatTensor", torch.float64: "DoubleTensor", torch.float16: "HalfTensor",
    torch.bfloat16: "BFloat16Tensor", torch.int64: "LongTensor", torch.int32: "IntTensor",
    torch.int16: "ShortTensor", torch.int8: "CharTensor", torch.uint8: "ByteTensor", torch.bool: "BoolTensor",
}  # fmt: skip


def type_name(dtype: torch.dtype, device: torch.device) -> str:
    """The type name eager's `Tensor.type()` gives (`torch.FloatTensor`, `torch.cuda.BFloat16Tensor`)."""
    check(
        dtype in _TYPE_NAMES,
        lambda: f"Tensor.type() of a {dtype} tensor is not supported{called_at()}",
        NotImplementedError,
    )
    return f"torch.{_TYPE_NAMES[dtype]}" if device.type == "cpu" else f"torch.{device.type}.{_TYPE_NAMES[dtype]}"


def _dtype_of_type_name(name: str, input: TensorProxy) -> torch.dtype:
    dtype = next((d for d, short in _TYPE_NAMES.items() if name.endswith(f".{short}")), None)
    check(
        dtype is not None and name == type_name(dtype, input.device),
        lambda: (
            f"Tensor.type({name!r}) of {input.name} on {input.device}: a type name of that device expected{called_at()}"
        ),
        NotImplementedError,
    )
    return dtype


@register("torch.Tensor.type")
def type_(input: TensorProxy, dtype: Any = None, non_blocking: bool = False) -> Any:
    """`x.type()` is its type name (a string); `x.type(torch.float16)`, `x.type("torch.HalfTensor")`
    or `x.type(torch.HalfTensor)` a conversion."""
    if dtype is None:
        return type_name(input.dtype, input.device)
    if isinstance(dtype, type) and dtype.__module__ in ("torch", "torch.cuda"):  # torch.DoubleTensor
        dtype = f"{dtype.__module__}.{dtype.__name__}"
    if isinstance(dtype, str):
        dtype = _dtype_of_type_name(dtype, input)
    check(
        isinstance(dtype, torch.dtype),
        lambda: f"Tensor.type() takes a torch.dtype or a type name string, got {dtype!r}{called_at()}",
        NotImplementedError,
    )
    return to_dtype(input, dtype)


@register("torch.Tensor.type_as")
def type_as(input: TensorProxy, other: TensorProxy) -> Any:
    return to_dtype(input, other.dtype)


def _cast_method(name: str, dtype: torch.dtype) -> None:
    @register(f"torch.Tensor.{name}")
    def op(input: TensorProxy, memory_format: Any = None) -> Any:
        return to_dtype(input, dtype)


for _name, _dtype in (
    ("float", torch.float32),
    ("double", torch.float64),
    ("half", torch.float16),
    ("bfloat16", torch.bfloat16),
    ("int", torch.int32),
    ("short", torch.int16),
    ("char", torch.int8),
    ("byte", torch.uint8),
    ("long", torch.int64),
    ("bool", torch.bool),
):
    _cast_method(_name, _dtype)
