"""Proxies: the values a trace computes with.

`TensorProxy` carries shape, dtype and device, and forwards torch functions, Tensor methods and
Python operators to the ops table. `NumberProxy` is an int/float/bool kept symbolic: arithmetic
and comparisons on it are recorded as prims, and asking for its concrete value (`bool()`,
`int()`, `__index__`) records a guard. Shapes may hold NumberProxy sizes.
"""

from __future__ import annotations

import builtins
import functools
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from compiler.core import dtypes
from compiler.core.context import current, fresh_name
from compiler.core.errors import TracingError, called_at, missing_attribute


class Proxy:
    """A named value of a trace; used as is for opaque Python values (argument containers)."""

    __slots__ = ("name",)

    def __init__(self, name: str | None = None) -> None:
        self.name = name if name is not None else fresh_name("p")

    def __repr__(self) -> str:
        return self.name

    def type_string(self) -> str:
        """What the printed trace says about this value in comments."""
        return "object"


@dataclass
class Hooks:
    """What proxies compute with, installed by the layers above when they are imported.

    NOTE: proxies sit below the prims and ops they call (imports point down), so those layers
    install themselves here: `compiler.prims` sets `bind_prim`, `compiler.ops` sets `dispatch`.
    """

    dispatch: Callable[[Callable, tuple, dict], Any] | None = None  # (torch fn, args, kwargs) -> result
    bind_prim: Callable[..., Any] | None = None  # (prim name, *args) -> result
    # a tensor proxy's value where it is known while tracing (compiler.ops.known_values), else None
    known_value: Callable[[Any], Any] | None = None


HOOKS = Hooks()


def _installed(hook: Callable | None, what: str) -> Callable:
    if hook is None:
        raise RuntimeError(f"proxies cannot {what} before compiler.ops and compiler.prims are imported")
    return hook


def _dispatch(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    return _installed(HOOKS.dispatch, "call torch functions")(fn, args, kwargs)


def _bind_prim(name: str, *args: Any) -> Any:
    return _installed(HOOKS.bind_prim, "record prims")(name, *args)


def _value_error(what: str) -> TracingError:
    return TracingError(
        f"{what} needs the value of a tensor, which is not known while tracing: control flow and "
        f"Python conversions that depend on tensor values cannot be compiled{called_at()}. "
        "Compute the condition outside the jitted function, or express it with torch.where."
    )


class TensorProxy(Proxy):
    """A tensor seen while tracing: shape (ints or NumberProxy sizes), dtype and device."""

    __slots__ = ("device", "dtype", "shape")

    def __init__(self, shape: tuple, dtype: torch.dtype, device: torch.device, name: str | None = None) -> None:
        self.name = name if name is not None else fresh_name("t")
        self.shape = tuple(shape)
        self.dtype = dtype
        self.device = device

    __hash__ = object.__hash__

    def type_string(self) -> str:
        dims = ", ".join(str(s) for s in self.shape)
        return f"{self.device} {dtypes.short_name(self.dtype)}[{dims}]"

    # metadata -------------------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return len(self.shape)

    ndimension = dim

    @property
    def requires_grad(self) -> bool:
        raise AttributeError(
            f"reading requires_grad of the traced tensor {self.name} is not supported (it is known per call, "
            "not while tracing)"
        )

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        # NOTE: `x.requires_grad = True` (wav2vec2's feature encoder, for gradient checkpointing)
        # asks for a gradient of an intermediate that nothing reads: autodiff already gives every
        # input that requires grad its gradient, through x where x depends on one.
        if value is not True:
            raise NotImplementedError(
                f"setting requires_grad={value!r} on the traced tensor {self.name} is not supported"
            )

    def size(self, dim: int | None = None) -> Any:
        if dim is None:
            return self.shape
        return self.shape[dim]

    def numel(self) -> Any:
        return size_product(self.shape)

    nelement = numel

    def element_size(self) -> int:
        return self.dtype.itemsize

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    # NOTE: a traced tensor is a dense one (nn.MultiheadAttention asks before its slow path)
    is_nested = False

    @property
    def data(self) -> TensorProxy:
        """`tensor.data`: the same memory without autograd history, as `detach()` (a write through it
        reaches the tensor, and autograd does not record it)."""
        return _dispatch(torch.Tensor.detach, self)

    @data.setter
    def data(self, value: Any) -> None:
        raise NotImplementedError(
            f"assigning {self.name}.data is not supported while tracing (it rebinds the tensor to other memory; "
            f"write into it instead, e.g. {self.name}.data.copy_(value)){called_at()}"
        )

    @property
    def T(self) -> TensorProxy:
        return _dispatch(torch.Tensor.permute, self, *reversed(range(self.ndim)))

    @property
    def mT(self) -> TensorProxy:
        return _dispatch(torch.Tensor.transpose, self, -2, -1)

    # a real tensor's conjugate is itself; .real and .imag as torch.real and torch.imag
    mH = property(lambda self: self.mT)
    H = property(lambda self: self.T)
    real = property(lambda self: _dispatch(torch.real, self))
    imag = property(lambda self: _dispatch(torch.imag, self))

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError(f"len() of a 0-d tensor{called_at()}")
        return int(self.shape[0])

    def __iter__(self) -> Iterator[TensorProxy]:
        return (self[i] for i in range(len(self)))

    # values that tracing cannot know ---------------------------------------------------------
    def _known(self, what: str) -> Any:
        """The value while tracing, where it is known (a constant of the trace), else the error."""
        value = HOOKS.known_value(self) if HOOKS.known_value is not None else None
        if value is None:
            raise _value_error(what)
        return value

    def __bool__(self) -> bool:
        return bool(self._known("bool(tensor) (an `if` or `while` on a tensor)"))

    def __int__(self) -> int:
        return int(self._known("int(tensor)"))

    def __float__(self) -> float:
        return float(self._known("float(tensor)"))

    def __index__(self) -> int:
        return self._known("using a tensor as an index").__index__()

    def item(self) -> Any:
        return self._known("tensor.item()").item()

    def tolist(self) -> Any:
        return self._known("tensor.tolist()").tolist()

    def numpy(self) -> Any:
        raise _value_error("tensor.numpy()")

    # everything else goes through the ops table ---------------------------------------------
    @classmethod
    def __torch_function__(cls, func: Callable, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        return _dispatch(func, *args, **(kwargs or {}))

    def __getattr__(self, name: str) -> Any:
        method = getattr(torch.Tensor, name, None) if not name.startswith("_") else None
        if name == "requires_grad":  # NOTE: the property raised; say why, not that it is missing
            raise AttributeError(
                f"reading requires_grad of the traced tensor {self.name} is not supported (it is known per call, "
                f"not while tracing){called_at()}"
            )
        if method is None or not callable(method):
            raise AttributeError(missing_attribute(name, self.name, method is not None))
        return functools.partial(_dispatch, method, self)


def _tensor_method(name: str) -> Callable:
    fn = getattr(torch.Tensor, name)

    def method(self: TensorProxy, *args: Any, **kwargs: Any) -> Any:
        return _dispatch(fn, self, *args, **kwargs)

    method.__name__ = name
    return method


for _name in (
    "__add__",
    "__radd__",
    "__sub__",
    "__rsub__",
    "__mul__",
    "__rmul__",
    "__truediv__",
    "__rtruediv__",
    "__floordiv__",
    "__rfloordiv__",
    "__mod__",
    "__rmod__",
    "__pow__",
    "__rpow__",
    "__matmul__",
    "__rmatmul__",
    "__neg__",
    "__pos__",
    "__abs__",
    "__invert__",
    "__and__",
    "__rand__",
    "__or__",
    "__ror__",
    "__xor__",
    "__rxor__",
    "__lshift__",
    "__rlshift__",
    "__rshift__",
    "__rrshift__",
    "__eq__",
    "__ne__",
    "__lt__",
    "__le__",
    "__gt__",
    "__ge__",
    "__getitem__",
    "__setitem__",
    "__iadd__",
    "__isub__",
    "__imul__",
    "__itruediv__",
    "__ifloordiv__",
    "__imod__",
    "__ipow__",
    "__iand__",
    "__ior__",
    "__ixor__",
):
    setattr(TensorProxy, _name, _tensor_method(_name))


class NumberProxy(Proxy):
    """A Python int, float or bool kept symbolic; `value` is what it was when traced.

    Arithmetic and comparisons are recorded as prims. Asking for a concrete value (`bool()`,
    `int()`, `__index__`) records a guard that the prologue checks before the trace is reused.
    """

    __slots__ = ("python_type", "value")

    def __init__(self, python_type: type, value: Any, name: str | None = None) -> None:
        prefix = {bool: "b", int: "i", float: "f"}.get(python_type, "n")
        self.name = name if name is not None else fresh_name(prefix)
        self.python_type = python_type
        self.value = value

    __hash__ = object.__hash__

    def type_string(self) -> str:
        return f"{self.python_type.__name__} {self.value!r}"

    def _guarded(self) -> Any:
        _bind_prim("check_value", self, self.value)
        return self.value

    def __bool__(self) -> bool:
        if self.python_type is bool:
            return self._guarded()
        return bool(_number_op("ne", self, 0))

    def __index__(self) -> int:
        check_int = self.python_type in (int, bool)
        if not check_int:
            raise TypeError(f"a float ({self.name}) cannot be used as an index{called_at()}")
        value = int(self._guarded())
        context = current()
        if context is not None:  # see TraceContext.drop_argument_parser_guards
            context.note_index_guard(sys._getframe(1))
        return value

    def __int__(self) -> int:
        return int(self._guarded())

    def __float__(self) -> float:
        return float(self._guarded())

    def __round__(self, ndigits: int | None = None) -> Any:
        return round(self._guarded(), ndigits)


# binary prim name -> NumberProxy's (operator, reflected operator) recording it, for every binary prim
# (keyed by name: core sits below compiler.prims)
_NUMBER_OPS = {
    "add": ("__add__", "__radd__"),
    "sub": ("__sub__", "__rsub__"),
    "mul": ("__mul__", "__rmul__"),
    "div": ("__truediv__", "__rtruediv__"),
    "floor_divide": ("__floordiv__", "__rfloordiv__"),
    "remainder": ("__mod__", "__rmod__"),
    "pow": ("__pow__", "__rpow__"),
    "bitwise_and": ("__and__", "__rand__"),
    "bitwise_or": ("__or__", "__ror__"),
    "bitwise_xor": ("__xor__", "__rxor__"),
    # (None, None): no operator; Python spells these as functions (max, min, math.fmod, math.atan2)
    "maximum": (None, None),
    "minimum": (None, None),
    "fmod": (None, None),
    "atan2": (None, None),
    "eq": ("__eq__", None),
    "ne": ("__ne__", None),
    "lt": ("__lt__", None),
    "le": ("__le__", None),
    "gt": ("__gt__", None),
    "ge": ("__ge__", None),
}
_IDENTITIES = {"add": 0, "sub": 0, "mul": 1, "div": 1, "floor_divide": 1}
# comparisons of an int with itself, known without recording a guard
_REFLEXIVE = {"eq": True, "le": True, "ge": True, "ne": False, "lt": False, "gt": False}


def _number_op(prim_name: str, a: Any, b: Any) -> Any:
    """Records `prim_name(a, b)` on numbers, folding `x + 0`, `x * 1` and friends to `x`, and an
    int compared with itself to its answer."""
    numbers = (int, float, bool, NumberProxy)
    if not isinstance(b, numbers) or not isinstance(a, numbers):
        return NotImplemented
    if a is b and prim_name in _REFLEXIVE and a.python_type is int:
        return _REFLEXIVE[prim_name]
    identity = _IDENTITIES.get(prim_name)
    if (
        identity is not None
        and type(b) is int
        and b == identity
        and isinstance(a, NumberProxy)
        and a.python_type is int
        and prim_name != "div"
    ):
        return a
    return _bind_prim(prim_name, a, b)


def _number_method(prim_name: str, reflected: bool) -> Callable:
    if reflected:
        return lambda self, other: _number_op(prim_name, other, self)
    return lambda self, other: _number_op(prim_name, self, other)


for _prim_name, (_forward, _reflected) in _NUMBER_OPS.items():
    if _forward:
        setattr(NumberProxy, _forward, _number_method(_prim_name, False))
    if _reflected:
        setattr(NumberProxy, _reflected, _number_method(_prim_name, True))


def _number_abs(self: NumberProxy) -> Any:
    return _bind_prim("abs", self)


def _number_invert(self: NumberProxy) -> Any:
    if self.python_type is float:
        raise TypeError(f"bad operand type for unary ~: a float ({self.name}){called_at()}")
    return _bind_prim("bitwise_not", self)


NumberProxy.__neg__ = lambda self: _number_op("mul", self, -1)
NumberProxy.__pos__ = lambda self: self
NumberProxy.__abs__ = _number_abs
NumberProxy.__invert__ = _number_invert


def proxies_in(value: Any) -> Iterator[Proxy]:
    """The proxies inside a (nested tuple / list / dict / slice) value, in order."""
    found: list[Proxy] = []
    _collect(value, found)
    return iter(found)


# NOTE: the builtin itself: while a program is traced, `builtins.isinstance` is a Python function
# (tracing/patches.py) that answers as the builtin for anything but torch.Tensor, which
# `_collect` never asks about; called per value of every line, it would pay a Python call each.
_builtin_isinstance = builtins.isinstance


def _collect(value: Any, found: list[Proxy]) -> None:
    # NOTE: a list filled by plain recursion, not nested generators: passes ask every line of a
    # trace for its proxies, and a generator per nesting level was the compiler's hottest code.
    isinstance = _builtin_isinstance
    if isinstance(value, Proxy):
        found.append(value)
    elif isinstance(value, (tuple, list)):
        for item in value:
            if isinstance(item, Proxy):
                found.append(item)
            elif isinstance(item, (tuple, list, dict, slice)):
                _collect(item, found)
    elif isinstance(value, dict):
        for item in value.values():
            _collect(item, found)
    elif isinstance(value, slice):
        _collect((value.start, value.stop, value.step), found)


def map_proxies(value: Any, fn: Callable[[Proxy], Any]) -> Any:
    """`value` with every proxy inside replaced by `fn(proxy)` (containers rebuilt, not mutated)."""
    if isinstance(value, Proxy):
        return fn(value)
    if isinstance(value, tuple):
        return rebuild_tuple(type(value), [map_proxies(v, fn) for v in value])
    if isinstance(value, list):
        return [map_proxies(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: map_proxies(v, fn) for k, v in value.items()}
    if isinstance(value, slice):
        return slice(*(map_proxies(v, fn) for v in (value.start, value.stop, value.step)))
    return value


def rebuild_tuple(kind: type, items: list) -> tuple:
    """A tuple of type `kind` (tuple, a namedtuple, or a structseq such as torch.return_types.max)."""
    if kind is tuple:
        return tuple(items)
    return kind(*items) if hasattr(kind, "_fields") else kind(items)


def size_product(sizes: Any) -> Any:
    """The product of sizes that may be NumberProxy values (no `1 * n` is recorded for symbolic n)."""
    result: Any = 1
    for s in sizes:
        result = s if type(result) is int and result == 1 else result * s
    return result


def is_unit(size: object) -> bool:
    """True for a size that is the constant 1 (a symbolic size never is: no guard is recorded)."""
    return type(size) is int and size == 1


def same_extent(a: object, b: object) -> bool:
    """Whether two sizes of a trace are the same: equal ints, or one symbolic size.

    NOTE: not `same_size`, nor `==`: outside tracing, `==` on a NumberProxy (an int on one
    side included) evaluates the `eq` prim, which compares the proxies again (without end)."""
    if isinstance(a, NumberProxy) or isinstance(b, NumberProxy):
        return a is b or (isinstance(a, NumberProxy) and isinstance(b, NumberProxy) and a.name == b.name)
    return a == b


def same_size(a: Any, b: Any) -> bool:
    """Whether two sizes are equal; comparing a NumberProxy records a guard."""
    return a is b or bool(a == b)
