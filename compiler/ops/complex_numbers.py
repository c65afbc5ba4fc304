"""Complex numbers: torch calls on complex values as calls on their real and imaginary parts.

Each decomposition for complex values (`registry.COMPLEX_OPS`) takes `ComplexProxy`s
(ops/complex_proxy.py), real tensor proxies and Python numbers, and computes with torch calls on
real tensor proxies, which the ops' `dispatch` records as the program's own calls would be (grad
mode, type promotion and broadcasting as they are for real tensors). Here: the helpers they share
(operands as parts, torch's complex result dtype, complex values from parts), making complex
values (`torch.view_as_complex`, `torch.polar`, `torch.complex`, `.to` a complex dtype, zeros and
ones) and reading them back (`torch.view_as_real`, `torch.real`, `torch.imag`, `.to` a real
dtype); arithmetic and layout ops are in complex_arithmetic.py. Result dtypes are torch's
(`complex64` for float32 parts, `complex128` for float64).

Writes into complex tensors (in-place ops, `__setitem__`) and every other op on complex values
raise one NotImplementedError naming the op and the program's line (ops/registry.py).
"""

from __future__ import annotations

import warnings
from typing import Any

import torch

from compiler.core import dtypes
from compiler.core.errors import called_at, check
from compiler.core.proxies import NumberProxy, TensorProxy, same_size
from compiler.ops.complex_proxy import COMPLEX_OF, ComplexProxy, call
from compiler.ops.operands import broadcast_shapes
from compiler.ops.registry import register_complex

Part = Any  # a real tensor proxy, a Python number or NumberProxy, or None (a part that is zero)


# operands and results ---------------------------------------------------------------------------
def result_dtype(*operands: Any) -> torch.dtype:
    """torch's complex result dtype of an elementwise op over `operands`."""
    dimensioned = [a.dtype for a in operands if isinstance(a, (TensorProxy, ComplexProxy)) and a.ndim > 0]
    zero_dim = [a.dtype for a in operands if isinstance(a, (TensorProxy, ComplexProxy)) and a.ndim == 0]
    numbers = [a.python_type if isinstance(a, NumberProxy) else type(a) for a in operands if is_number(a)]
    result = dtypes.promote(dimensioned, zero_dim, numbers)
    if not result.is_complex:
        result = COMPLEX_OF.get(result, torch.complex64) if result.is_floating_point else torch.complex64
    return result


def is_number(x: Any) -> bool:
    """Whether `x` is a Python number (complex included) or a NumberProxy."""
    return isinstance(x, (bool, int, float, complex, NumberProxy))


def parts(x: Any, part_dtype: torch.dtype) -> tuple[Part, Part]:
    """(real part, imaginary part or None) of an operand, tensors in `part_dtype`."""
    if isinstance(x, ComplexProxy):
        return cast(x.real, part_dtype), cast(x.imag, part_dtype)
    if isinstance(x, TensorProxy):
        return cast(x, part_dtype), None
    if type(x) is complex:
        return x.real, x.imag
    check(is_number(x), lambda: f"expected a tensor or a number, got {type(x).__name__}{called_at()}", TypeError)
    return x, None


def cast(t: TensorProxy, dtype: torch.dtype) -> TensorProxy:
    """`t` in `dtype` (itself where it already is)."""
    return t if t.dtype == dtype else t.to(dtype)


def make(real: Part, imag: Part, like: Any = None) -> ComplexProxy:
    """The complex value with these parts, both broadcast to one shape (a part that is None is zeros,
    a number a constant; where both are numbers, `like`, a complex operand, gives shape, dtype and
    device)."""
    tensors = [p for p in (real, imag) if isinstance(p, TensorProxy)]
    if not tensors:
        tensors = [torch.zeros_like(like.real if isinstance(like, ComplexProxy) else like)]
    shape = broadcast_shapes(*(t.shape for t in tensors))
    base = tensors[0]
    return ComplexProxy(_filled(real, base, shape), _filled(imag, base, shape))


def _filled(part: Part, base: TensorProxy, shape: tuple) -> TensorProxy:
    if not isinstance(part, TensorProxy):
        part = torch.full_like(base, 0.0 if part is None else part)
    if len(part.shape) != len(shape) or not all(same_size(a, b) for a, b in zip(part.shape, shape)):
        part = torch.broadcast_to(part, shape)
    return part


def add_parts(a: Part, b: Part) -> Part:
    """a + b, where None is zero."""
    return b if a is None else a if b is None else a + b


def sub_parts(a: Part, b: Part) -> Part:
    """a - b, where None is zero."""
    return a if b is None else -b if a is None else a - b


def mul_parts(a: Part, b: Part) -> Part:
    """a * b, where None is zero."""
    return None if a is None or b is None else a * b


def as_complex(x: Any, op: str) -> ComplexProxy:
    """`x`, checked to be a complex value (`op` names the caller in the error)."""
    check(
        isinstance(x, ComplexProxy),
        lambda: f"{op}: expected a complex tensor, got {getattr(x, 'dtype', type(x).__name__)}{called_at()}",
        TypeError,
    )
    return x


# making complex values and reading them back ---------------------------------------------------------
@register_complex("torch.view_as_complex", makes_complex=True)
def view_as_complex(input: Any) -> ComplexProxy:
    """The complex tensor whose parts are `input[..., 0]` and `input[..., 1]` (views of it).

    NOTE: eager also wants the last dim's stride 1 and the others even; a traced tensor's layout is
    the compiler's choice, so any is taken here."""
    pairs = isinstance(input, TensorProxy) and input.dtype in COMPLEX_OF and input.ndim > 0
    check(
        pairs and same_size(input.shape[-1], 2),
        lambda: (
            "torch.view_as_complex: expected a float16, float32 or float64 tensor whose last dim has size 2, got "
            f"{getattr(input, 'dtype', type(input).__name__)} of shape {tuple(getattr(input, 'shape', ()))}"
            f"{called_at()}"
        ),
        ValueError,
    )
    value = ComplexProxy.of_packed(input)
    value.real, value.imag  # noqa: B018  (the parts are views of `input` as of now, as in eager)
    return value


@register_complex("torch.view_as_real", makes_complex=True)
def view_as_real(input: Any) -> TensorProxy:
    value = as_complex(input, "torch.view_as_real")
    return value.packed if value.packed is not None else torch.stack([value.real, value.imag], -1)


def _same_real_dtype(op: str, a: Any, b: Any) -> None:
    check(
        isinstance(a, TensorProxy) and isinstance(b, TensorProxy) and a.dtype == b.dtype and a.dtype in COMPLEX_OF,
        lambda: (
            f"{op}: expected two float16, float32 or float64 tensors of one dtype, got "
            f"{getattr(a, 'dtype', type(a).__name__)} and {getattr(b, 'dtype', type(b).__name__)}{called_at()}"
        ),
        TypeError,
    )


@register_complex("torch.polar", makes_complex=True)
def polar(abs: Any, angle: Any) -> ComplexProxy:
    _same_real_dtype("torch.polar", abs, angle)
    return make(abs * torch.cos(angle), abs * torch.sin(angle))


@register_complex("torch.complex", makes_complex=True)
def complex_from_parts(real: Any, imag: Any) -> ComplexProxy:
    _same_real_dtype("torch.complex", real, imag)
    # NOTE: eager's result is new memory: copies, so a write through `.real` leaves `real` alone
    value = make(real, imag)
    return ComplexProxy(value.real.clone(), value.imag.clone())


@register_complex("torch.real", makes_complex=True)
def real(input: Any) -> TensorProxy:
    return input.real if isinstance(input, ComplexProxy) else input


@register_complex("torch.imag")
def imag(input: Any) -> TensorProxy:
    return as_complex(input, "torch.imag").imag


def _to_target(input: Any, args: tuple, kwargs: dict) -> tuple[Any, torch.dtype | None]:
    """(device or None, dtype or None) that `tensor.to(*args, **kwargs)` asks for."""
    device, dtype = kwargs.get("device"), kwargs.get("dtype")
    for a in args:
        if isinstance(a, torch.dtype):
            dtype = a
        elif isinstance(a, (torch.device, str, int)):
            device = a
        elif isinstance(a, (TensorProxy, ComplexProxy)):
            device, dtype = a.device, a.dtype
    return device, dtype


def _converted(input: Any, device: Any, dtype: torch.dtype | None) -> Any:
    """`input` (complex, or real) on `device` in `dtype` (complex or real), as torch converts."""
    if device is not None:
        input = (
            ComplexProxy(input.real.to(device), input.imag.to(device))
            if isinstance(input, ComplexProxy)
            else input.to(device)
        )
    if dtype is None or dtype == input.dtype:
        return input
    if not dtype.is_complex:
        if isinstance(input, TensorProxy):
            return input.to(dtype)
        warnings.warn("Casting complex values to real discards the imaginary part", UserWarning, stacklevel=2)
        return input.real.to(dtype)
    part_dtype = dtype.to_real()
    if isinstance(input, ComplexProxy):
        return ComplexProxy(cast(input.real, part_dtype), cast(input.imag, part_dtype))
    return make(cast(input, part_dtype), None)


@register_complex("torch.Tensor.to")
def to(input: Any, *args: Any, **kwargs: Any) -> Any:
    device, dtype = _to_target(input, args, kwargs)
    return _converted(input, device, dtype)


@register_complex("torch.Tensor.type_as")
def type_as(input: Any, other: Any) -> Any:
    return _converted(input, None, other.dtype)


@register_complex("torch.Tensor.type")
def type_(input: Any, dtype: torch.dtype | None = None, non_blocking: bool = False) -> Any:
    check(isinstance(dtype, torch.dtype), lambda: f"tensor.type: pass a dtype{called_at()}", TypeError)
    return _converted(input, None, dtype)


def _conversion(name: str, dtype: torch.dtype) -> None:
    register_complex(f"torch.Tensor.{name}", makes_complex=dtype.is_complex)(
        lambda input, memory_format=None: _converted(input, None, dtype)
    )


for _name, _dtype in (
    ("float", torch.float32), ("double", torch.float64), ("half", torch.float16), ("bfloat16", torch.bfloat16),
    ("cfloat", torch.complex64), ("cdouble", torch.complex128),
):  # fmt: skip
    _conversion(_name, _dtype)


def _factory_like(name: str, real_fill: float) -> None:
    def like(input: Any, *, dtype: torch.dtype | None = None, **kwargs: Any) -> ComplexProxy:
        dtype = dtype or input.dtype
        check(dtype.is_complex, lambda: f"torch.{name}: {dtype} for a complex tensor{called_at()}", NotImplementedError)
        base = input.real if isinstance(input, ComplexProxy) else input
        part_dtype = dtype.to_real()
        real_part = torch.full_like(base, real_fill, dtype=part_dtype, **kwargs)
        return ComplexProxy(real_part, torch.zeros_like(base, dtype=part_dtype, **kwargs))

    register_complex(f"torch.{name}")(like)


_factory_like("zeros_like", 0.0)
_factory_like("ones_like", 1.0)
_factory_like("empty_like", 0.0)  # NOTE: any contents will do; zeros are cheapest to reason about


def _factory(name: str, real_fill: float) -> None:
    def factory(*size: Any, dtype: torch.dtype | None = None, **kwargs: Any) -> Any:
        if dtype is None or not dtype.is_complex:
            raise NotImplementedError(f"torch.{name} with a complex argument is not supported{called_at()}")
        # NOTE: through dispatch: no proxy among the arguments would take torch.full there
        real_part = call(_FULL, _size(size), real_fill, dtype=dtype.to_real(), **kwargs)
        return ComplexProxy(real_part, torch.zeros_like(real_part))

    register_complex(f"torch.{name}")(factory)


_FULL = torch.full  # NOTE: torch's own, not the bypass tracing installs (tracing/patches.py)


def _size(size: tuple) -> tuple:
    return tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)) else size


_factory("zeros", 0.0)
_factory("ones", 1.0)
