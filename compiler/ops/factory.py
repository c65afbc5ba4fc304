"""Factory ops: zeros, ones, full, empty, arange, linspace, and the *_like variants.

Sizes may be NumberProxy values; dtypes and devices default as in torch (the default dtype,
the default device).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from compiler import prims
from compiler.core import dtypes
from compiler.core.errors import called_at, check
from compiler.core.ir import NumberProxy, TensorProxy, canonical_device
from compiler.ops.aliasing import set_memory_format
from compiler.ops.elementwise import where
from compiler.ops.operands import Promotion, elementwise, to_dtype
from compiler.ops.registry import register
from compiler.ops.shape import _sizes


def _check_factory_kwargs(name: str, out: Any, layout: Any, pin_memory: Any) -> None:
    check(out is None, lambda: f"{name}: out= is not supported{called_at()}", NotImplementedError)
    check(
        layout in (None, torch.strided),
        lambda: f"{name}: only the strided layout is supported{called_at()}",
        NotImplementedError,
    )
    check(not pin_memory, lambda: f"{name}: pin_memory is not supported{called_at()}", NotImplementedError)


def size_arguments(name: str, sizes: tuple, size: Any) -> tuple:
    """The sizes a factory was given, positionally (`torch.zeros(2, 3)`, `torch.zeros((2, 3))`) or
    as its `size=` keyword (`torch.zeros(size=(2, 3))`, which torch's parser takes too)."""
    if size is None:
        return sizes
    check(not sizes, lambda: f"{name}: size given both positionally and as size={size!r}{called_at()}", TypeError)
    return (size,)


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
    return prims.full(shape, value, dtype, canonical_device(device))


def _factory(name: str, value: Any) -> None:
    @register(f"torch.{name}")
    def op(
        *sizes: Any,
        size: Any = None,
        out: Any = None,
        dtype: Any = None,
        layout: Any = None,
        device: Any = None,
        requires_grad: bool = False,
        pin_memory: bool = False,
        memory_format: Any = None,
    ) -> Any:
        _check_factory_kwargs(f"torch.{name}", out, layout, pin_memory)
        size = size_arguments(f"torch.{name}", sizes, size)
        return _full(f"torch.{name}", size, value, dtype or torch.get_default_dtype(), device)


_factory("zeros", 0)
_factory("ones", 1)


@register("torch.empty")
def empty(
    *sizes: Any,
    size: Any = None,
    out: Any = None,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    pin_memory: bool = False,
    memory_format: Any = None,
) -> Any:
    _check_factory_kwargs("torch.empty", out, layout, pin_memory)
    size = size_arguments("torch.empty", sizes, size)
    return prims.empty(_sizes(size), dtype or torch.get_default_dtype(), canonical_device(device))


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
        out = _full(f"torch.{name}_like", list(input.shape), value, dtype or input.dtype, device or input.device)
        set_memory_format(out, input, memory_format)
        return out


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
    out = prims.empty(list(input.shape), dtype or input.dtype, device or input.device)
    set_memory_format(out, input, memory_format)
    return out


def _new(name: str, value: Any) -> None:
    @register(f"torch.Tensor.new_{name}")
    def op(
        self: TensorProxy,
        *sizes: Any,
        size: Any = None,
        dtype: Any = None,
        layout: Any = None,
        device: Any = None,
        requires_grad: bool = False,
        pin_memory: bool = False,
    ) -> Any:
        _check_factory_kwargs(f"Tensor.new_{name}", None, layout, pin_memory)
        size = _sizes(size_arguments(f"Tensor.new_{name}", sizes, size))
        if value is None:  # new_empty: uninitialised memory (DeepSeek's attention fills one with slice writes)
            where = canonical_device(device) if device is not None else self.device
            return prims.empty(size, dtype or self.dtype, where)
        return _full(f"Tensor.new_{name}", size, value, dtype or self.dtype, device or self.device)


_new("zeros", 0)
_new("ones", 1)
_new("empty", None)


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
    out = _full("torch.full_like", list(input.shape), fill_value, dtype or input.dtype, device or input.device)
    set_memory_format(out, input, memory_format)
    return out


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
    if not dtype.is_floating_point:
        # NOTE: torch truncates the bounds of an integer range to integers before sizing it: a float
        # given as a number is truncated here, so the others may stay symbolic (XLNet's
        # arange(beg, end, -1.0, dtype=torch.int64) over a symbolic length)
        start, end, step = (int(v) if isinstance(v, float) else v for v in (start, end, step))
        values = [int(v) if isinstance(v, float) else v for v in values]
    check(values[2] != 0, lambda: f"torch.arange: step must be nonzero{called_at()}", RuntimeError)
    bounds = (start, end, step)
    if not dtype.is_floating_point and any(isinstance(v, NumberProxy) for v in bounds) and all(map(_is_int, bounds)):
        # A range over symbolic ints (a symbolic size, numbers="symbolic") has a symbolic length,
        # start and step; the step's sign and whether the range is empty are guarded.
        length = (end - (start - step + (1 if bool(step > 0) else -1))) // step  # NOTE: arange(n)'s is n itself
        return prims.iota(length if bool(length > 0) else 0, start, step, dtype, canonical_device(device))
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
        canonical_device(device),
    )


def _is_int(value: Any) -> bool:
    """An int or a symbolic int (not a bool)."""
    if isinstance(value, NumberProxy):
        return value.python_type is int
    return isinstance(value, int) and not isinstance(value, bool)


def _on_host(compute: Callable[[], torch.Tensor]) -> Any:
    """The Python number `compute` gives: torch on CPU scalars at trace time, as eager computes it."""
    with torch._C.DisableTorchFunction():  # NOTE: not traced, even where the tracing mode is active
        return compute().item()


def _rounded(x: TensorProxy, dtype: torch.dtype | None) -> TensorProxy:
    """`x` rounded to `dtype` and back (unchanged when `dtype` is None)."""
    return x if dtype is None else to_dtype(to_dtype(x, dtype), x.dtype)


def _multiply_add(base: Any, step: Any, count: TensorProxy, rounded: torch.dtype | None, fused: bool) -> TensorProxy:
    """base + step * count as torch's linspace kernels round it: bf16 and f16 round the product to
    `rounded` first (their arithmetic rounds each operation); integer dtypes, truncated afterwards,
    round once as the fused multiply-add eager's kernels compile to (CUDA, and CPUs with FMA) does."""

    def add(a: Any, b: Any) -> Any:
        return elementwise(prims.add, a, b)

    def sub(a: Any, b: Any) -> Any:
        return elementwise(prims.sub, a, b)

    def mul(a: Any, b: Any) -> Any:
        return elementwise(prims.mul, a, b)

    if not fused:
        return add(base, _rounded(mul(step, count), rounded))
    # step = high + low where high * count is exact (Veltkamp's split; counts below 2**27); base +
    # high * count is summed exactly (Knuth's two-sum) before low * count joins it, so the result
    # is rounded once in all but extremely rare cases.
    scaled = mul(134217729.0, step)
    high = sub(scaled, sub(scaled, step))
    product = mul(high, count)
    total = add(base, product)
    back = sub(total, base)
    error = add(sub(base, sub(total, back)), sub(product, back))
    return add(total, add(error, mul(sub(step, high), count)))


def _linspace_bound(name: str, value: Any, dtype: torch.dtype, compute: torch.dtype) -> Any:
    """linspace's `start` or `end` rounded to `dtype` (as torch converts it), in `compute`: a Python
    number, or a 0-d tensor."""
    check(
        not isinstance(value, complex) and not (isinstance(value, TensorProxy) and value.dtype.is_complex),
        lambda: f"torch.linspace: complex bounds are not supported{called_at()}",
        NotImplementedError,
    )
    if isinstance(value, TensorProxy):
        check(
            value.ndim == 0,
            lambda: f"torch.linspace: a tensor {name} must be 0-d, got shape {tuple(value.shape)}{called_at()}",
            ValueError,
        )
        return to_dtype(to_dtype(value, dtype), compute)
    check(
        isinstance(value, (int, float, bool, NumberProxy)),
        lambda: f"torch.linspace: {name} must be a number or a 0-d tensor, got {type(value).__name__}{called_at()}",
        TypeError,
    )
    # NOTE: a symbolic bound is specialised (guarded): the rounding below needs its value.
    value = value.python_type(value) if isinstance(value, NumberProxy) else value
    if dtype.is_floating_point:
        fits = not math.isfinite(value) or abs(value) <= torch.finfo(dtype).max
    else:  # as torch converts: unsigned dtypes take negative values down to -max (they wrap)
        info = torch.iinfo(dtype)
        fits = (-info.max if info.min == 0 else info.min) <= value <= info.max
    check(
        fits,
        lambda: f"torch.linspace: {name} {value!r} cannot be converted to {dtype} without overflow{called_at()}",
        ValueError,
    )
    source = torch.float64 if isinstance(value, float) else torch.int64
    return _on_host(lambda: torch.tensor(value, dtype=source).to(dtype))


@register("torch.linspace")
def linspace(
    start: Any,
    end: Any,
    steps: Any,
    *,
    out: Any = None,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    pin_memory: bool = False,
) -> Any:
    """torch.linspace: start + i * step in the first half, end - (steps - 1 - i) * step in the second."""
    _check_factory_kwargs("torch.linspace", out, layout, pin_memory)
    dtype = dtype or torch.get_default_dtype()
    check(
        dtype != torch.bool and not dtype.is_complex,
        lambda: f"torch.linspace: dtype {dtype} is not supported (floating and integer dtypes are){called_at()}",
        NotImplementedError,
    )
    check(
        isinstance(steps, (int, NumberProxy)) and not isinstance(steps, bool) and bool(steps >= 0),
        lambda: f"torch.linspace: steps must be a non-negative int, got {steps!r}{called_at()}",
        ValueError,
    )
    device = canonical_device(device)
    # torch computes the step in the dtype (in float64 for integer dtypes), the values in its compute dtype.
    step_dtype = dtype if dtype.is_floating_point else torch.float64
    compute = dtypes.compute_dtype(step_dtype)
    rounded = step_dtype if step_dtype != compute else None
    lo = _linspace_bound("start", start, dtype, compute)
    hi = _linspace_bound("end", end, dtype, compute)
    if steps == 1:
        if isinstance(lo, TensorProxy):
            return to_dtype(prims.broadcast_in_dim(lo, [1], []), dtype)
        return _full("torch.linspace", [1], lo, dtype, device)
    if isinstance(lo, TensorProxy) or isinstance(hi, TensorProxy) or isinstance(steps, NumberProxy):
        span = elementwise(prims.sub, hi, lo)
        span = span if isinstance(span, TensorProxy) else prims.full([], span, compute, device)
        step = _rounded(elementwise(prims.div, _rounded(span, rounded), steps - 1), rounded)
    else:  # rounded as torch rounds it: (end - start) / (steps - 1) in the step's dtype
        step = _on_host(lambda: (torch.tensor(hi, dtype=step_dtype) - torch.tensor(lo, dtype=step_dtype)) / (steps - 1))
    index = prims.iota(steps, 0, 1, torch.int64, device)
    fused = not dtype.is_floating_point
    head = _multiply_add(lo, step, to_dtype(index, compute), rounded, fused)
    remaining = to_dtype(elementwise(prims.sub, steps - 1, index), compute)
    tail = _multiply_add(hi, elementwise(prims.neg, step), remaining, rounded, fused)
    first_half = elementwise(prims.lt, index, steps // 2, promotion=Promotion.ALWAYS_BOOL)
    return to_dtype(where(first_half, head, tail), dtype)
