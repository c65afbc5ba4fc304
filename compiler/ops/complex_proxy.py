"""A complex tensor while tracing: a pair of real tensor proxies, never a value of the trace.

`ComplexProxy` holds the real and imaginary parts of a complex tensor as two `TensorProxy`s of
one shape, floating dtype and device. Every torch function, Tensor method and operator called on
one goes to the ops' `dispatch`, which runs the complex decomposition registered for it
(ops/complex_numbers.py) as calls on the parts. So traces, autodiff and the executors only ever
see real tensors, and gradients through complex arithmetic are those of the real arithmetic it
is made of, by construction.

A complex tensor given to a jitted function enters as its real view (`torch.view_as_real`, in
the prologue): `packed`, a real tensor whose last dim of size 2 holds the parts, which are read
from it (as views of it) the first time they are needed. `torch.view_as_complex` of a real
tensor makes one the same way, and `torch.view_as_real` of such a value gives `packed` back (a
view of the same memory, as eager gives).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

import torch

from compiler.core import proxies
from compiler.core.errors import TracingError, called_at
from compiler.core.proxies import TensorProxy, size_product

# the complex dtype whose parts have each real dtype
COMPLEX_OF = {torch.float16: torch.complex32, torch.float32: torch.complex64, torch.float64: torch.complex128}


def call(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)` through the ops' dispatch (torch's unbound Tensor methods included)."""
    return proxies.HOOKS.dispatch(fn, args, kwargs)


class ComplexProxy:
    """A complex tensor being traced: `real` and `imag` (see the module), or `packed`."""

    __slots__ = ("_imag", "_real", "packed")

    def __init__(self, real: TensorProxy | None, imag: TensorProxy | None, packed: TensorProxy | None = None) -> None:
        self._real = real
        self._imag = imag
        self.packed = packed  # a real tensor [..., 2] whose views the parts are, or None

    @classmethod
    def of_packed(cls, packed: TensorProxy) -> ComplexProxy:
        """The complex tensor whose real view is `packed` (a real tensor whose last dim has size 2)."""
        return cls(None, None, packed)

    @property
    def real(self) -> TensorProxy:
        """The real part (`tensor.real`)."""
        if self._real is None:
            self._real = call(torch.select, self.packed, -1, 0)
        return self._real

    @property
    def imag(self) -> TensorProxy:
        """The imaginary part (`tensor.imag`)."""
        if self._imag is None:
            self._imag = call(torch.select, self.packed, -1, 1)
        return self._imag

    @property
    def part_dtype(self) -> torch.dtype:
        """The real dtype of each part (float32 for complex64)."""
        return (self.packed if self.packed is not None else self._real).dtype

    # metadata -------------------------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        return self.packed.shape[:-1] if self.packed is not None else self._real.shape

    @property
    def dtype(self) -> torch.dtype:
        return COMPLEX_OF[self.part_dtype]

    @property
    def device(self) -> torch.device:
        return (self.packed if self.packed is not None else self._real).device

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return len(self.shape)

    def size(self, dim: int | None = None) -> Any:
        return self.shape if dim is None else self.shape[dim]

    def numel(self) -> Any:
        return size_product(self.shape)

    def element_size(self) -> int:
        return self.dtype.itemsize

    def is_complex(self) -> bool:
        return True

    def is_floating_point(self) -> bool:
        return False

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    is_nested = False

    @property
    def requires_grad(self) -> bool:
        raise AttributeError(
            f"reading requires_grad of the traced complex tensor {self!r} is not supported (it is known per call, "
            f"not while tracing){called_at()}"
        )

    @property
    def T(self) -> ComplexProxy:
        return call(torch.Tensor.permute, self, *reversed(range(self.ndim)))

    @property
    def mT(self) -> ComplexProxy:
        return call(torch.Tensor.transpose, self, -2, -1)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError(f"len() of a 0-d tensor{called_at()}")
        return int(self.shape[0])

    def __iter__(self) -> Iterator[ComplexProxy]:
        return (self[i] for i in range(len(self)))

    def __repr__(self) -> str:
        if self.packed is not None:
            return f"view_as_complex({self.packed.name})"
        return f"complex({self._real.name}, {self._imag.name})"

    # values that tracing cannot know ---------------------------------------------------------
    def _value_error(self, what: str) -> TracingError:
        return TracingError(
            f"{what} needs the value of the complex tensor {self!r}, which is not known while tracing{called_at()}"
        )

    def __bool__(self) -> bool:
        raise self._value_error("bool(tensor)")

    def __complex__(self) -> complex:
        raise self._value_error("complex(tensor)")

    def item(self) -> Any:
        raise self._value_error("tensor.item()")

    def tolist(self) -> Any:
        raise self._value_error("tensor.tolist()")

    # everything else goes through the ops' dispatch ------------------------------------------
    @classmethod
    def __torch_function__(cls, func: Callable, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        return proxies.HOOKS.dispatch(func, args, kwargs or {})

    def __getattr__(self, name: str) -> Any:
        method = getattr(torch.Tensor, name, None) if not name.startswith("_") else None
        if method is None or not callable(method):
            raise AttributeError(f"'ComplexProxy' object has no attribute '{name}'")
        return functools.partial(call, method, self)


def _tensor_method(name: str) -> Callable:
    fn = getattr(torch.Tensor, name)

    def method(self: ComplexProxy, *args: Any, **kwargs: Any) -> Any:
        return call(fn, self, *args, **kwargs)

    method.__name__ = name
    return method


# NOTE: Python looks operators up on the class, never through __getattr__
for _name in (
    "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
    "__pow__", "__rpow__", "__matmul__", "__rmatmul__", "__neg__", "__pos__", "__abs__", "__eq__", "__ne__",
    "__getitem__", "__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__",
):  # fmt: skip
    setattr(ComplexProxy, _name, _tensor_method(_name))
ComplexProxy.__hash__ = object.__hash__  # NOTE: __eq__ above would make it unhashable


def complex_dtype_or_number(value: Any) -> bool:
    """Whether `value` is a complex dtype or a Python complex number."""
    return type(value) is complex or (isinstance(value, torch.dtype) and value.is_complex)


def scan(args: tuple, kwargs: dict) -> tuple[bool, bool]:
    """(whether a `ComplexProxy` is among a call's arguments, whether a complex dtype or Python
    complex number is), looking one level into lists and tuples (`torch.cat([a, b])`)."""
    values = numbers = False
    for group in (args, kwargs.values()):
        for a in group:
            if type(a) in (list, tuple):
                for item in a:
                    values |= type(item) is ComplexProxy
                    numbers |= complex_dtype_or_number(item)
            else:
                values |= type(a) is ComplexProxy
                numbers |= complex_dtype_or_number(a)
    return values, numbers
