"""Factory ops: zeros, ones, full, empty, arange, and the *_like variants.

Sizes may be NumberProxy values; dtypes and devices default as in torch (the default dtype,
the default device).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from compiler import prims
from compiler.core import dtypes
from compiler.core.errors import called_at, check
from compiler.core.ir import NumberProxy, TensorProxy
from compiler.ops.registry import register
from compiler.ops.shape import _sizes


def _device(device: Any) -> torch.device:
    if device is None:
        return torch.get_default_device()
    return torch.device(device)


def _check_factory_kwargs(name: str, out: Any, layout: Any, pin_memory: Any) -> None:
    check(out is None, lambda: f"{name}: out= is not supported{called_at()}", NotImplementedError)
    check(
        layout in (None, torch.strided),
        lambda: f"{name}: only the strided layout is supported{called_at()}",
        NotImplementedError,
    )
    check(not pin_memory, lambda: f"{name}: pin_memory is not supported{called_at()}", NotImplementedError)


def _full(name: str, size: Any, value: Any, dtype: Any, device: Any) -> TensorProxy:
    shape = _sizes(size) if isinstance(size, tuple) else list(size)
    for s in shape:
        check(
            isinstance(s, (int, NumberProxy)) and not isinstance(s, bool),
            lambda s=s: f"{name}: sizes must be ints, got {type(s).__name__} {s!r}{called_at()}",
            TypeError,
        )
    if dtype is None:
        kind = value.python_type if isinstance(value, NumberProxy) else type(value)
        dtype = dtypes.default_dtype(dtypes.category(kind))
    if isinstance(value, (int, float, bool)):
        value = dtypes.python_type(dtype)(value)
    return prims.full(shape, value, dtype, _device(device))


def _factory(name: str, value: Any) -> None:
    @register(f"torch.{name}")
    def op(
        *size: Any,
        out: Any = None,
        dtype: Any = None,
        layout: Any = None,
        device: Any = None,
        requires_grad: bool = False,
        pin_memory: bool = False,
        memory_format: Any = None,
    ) -> Any:
        _check_factory_kwargs(f"torch.{name}", out, layout, pin_memory)
        return _full(f"torch.{name}", size, value, dtype or torch.get_default_dtype(), device)


_factory("zeros", 0)
_factory("ones", 1)


@register("torch.empty")
def empty(
    *size: Any,
    out: Any = None,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    pin_memory: bool = False,
    memory_format: Any = None,
) -> Any:
    _check_factory_kwargs("torch.empty", out, layout, pin_memory)
    return prims.empty(_sizes(size), dtype or torch.get_default_dtype(), _device(device))


@register("torch.full")
def full(
    size: Any,
    fill_value: Any,
    *,
    out: Any = None,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    pin_memory: bool = False,
) -> Any:
    _check_factory_kwargs("torch.full", out, layout, pin_memory)
    return _full("torch.full", list(size), fill_value, dtype, device)


def _like(name: str, value: Any) -> None:
    @register(f"torch.{name}_like")
    def op(
        input: TensorProxy,
        *,
        dtype: Any = None,
        layout: Any = None,
        device: Any = None,
        requires_grad: bool = False,
        memory_format: Any = None,
        pin_memory: bool = False,
    ) -> Any:
        _check_factory_kwargs(f"torch.{name}_like", None, layout, pin_memory)
        return _full(f"torch.{name}_like", list(input.shape), value, dtype or input.dtype, device or input.device)


_like("zeros", 0)
_like("ones", 1)


@register("torch.empty_like")
def empty_like(
    input: TensorProxy,
    *,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    memory_format: Any = None,
    pin_memory: bool = False,
) -> Any:
    _check_factory_kwargs("torch.empty_like", None, layout, pin_memory)
    return prims.empty(list(input.shape), dtype or input.dtype, device or input.device)


def _new(name: str, value: Any) -> None:
    @register(f"torch.Tensor.new_{name}")
    def op(
        self: TensorProxy,
        *size: Any,
        dtype: Any = None,
        layout: Any = None,
        device: Any = None,
        requires_grad: bool = False,
        pin_memory: bool = False,
    ) -> Any:
        _check_factory_kwargs(f"Tensor.new_{name}", None, layout, pin_memory)
        return _full(f"Tensor.new_{name}", _sizes(size), value, dtype or self.dtype, device or self.device)


_new("zeros", 0)
_new("ones", 1)


@register("torch.Tensor.new_full")
def new_full(
    self: TensorProxy,
    size: Any,
    fill_value: Any,
    *,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    pin_memory: bool = False,
) -> Any:
    _check_factory_kwargs("Tensor.new_full", None, layout, pin_memory)
    return _full("Tensor.new_full", list(size), fill_value, dtype or self.dtype, device or self.device)


@register("torch.full_like")
def full_like(
    input: TensorProxy,
    fill_value: Any,
    *,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    memory_format: Any = None,
    pin_memory: bool = False,
) -> Any:
    _check_factory_kwargs("torch.full_like", None, layout, pin_memory)
    return _full("torch.full_like", list(input.shape), fill_value, dtype or input.dtype, device or input.device)


@register("torch.arange")
def arange(
    start: Any,
    end: Any = None,
    step: Any = 1,
    *,
    out: Any = None,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    pin_memory: bool = False,
) -> Any:
    _check_factory_kwargs("torch.arange", out, layout, pin_memory)
    if end is None:
        start, end = 0, start
    values = [v.value if isinstance(v, NumberProxy) else v for v in (start, end, step)]
    if dtype is None:
        is_float = any(isinstance(v, float) for v in values)
        dtype = torch.get_default_dtype() if is_float else torch.int64
    check(values[2] != 0, lambda: f"torch.arange: step must be nonzero{called_at()}", ValueError)
    if not dtype.is_floating_point and isinstance(end, NumberProxy) and end.python_type is int:
        # A symbolic int end (a range over a symbolic size) gives a symbolic length; start and step
        # are specialised, and whether the range is empty is guarded.
        start, step = int(start), int(step)
        length = (end - (start - step + (1 if step > 0 else -1))) // step
        return prims.iota(length if length > 0 else 0, start, step, dtype, _device(device))
    if not dtype.is_floating_point:
        # NOTE: torch truncates the bounds of an integer range to integers before sizing it.
        start, end, step = (int(v) for v in (start, end, step))
        values = [start, end, step]
    # NOTE: the length decides the output shape, so other symbolic bounds are specialised (guarded).
    length = max(0, math.ceil((float(end) - float(start)) / float(step)))
    return prims.iota(
        length,
        values[0] if not isinstance(start, NumberProxy) else int(start),
        values[2],
        dtype,
        _device(device),
    )
