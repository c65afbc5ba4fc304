"""The IR: proxies, bound symbols and traces, and printing a trace as runnable Python.

A trace is a straight-line program in single-assignment form. Each `BoundSymbol` applies a
symbol (a `Prim`, or a `Symbol` naming a torch-level op or an executor's fused region) to
arguments that are proxies or Python constants, and binds its output proxies. Proxies stand for
values seen while tracing: `TensorProxy` carries shape, dtype and device; `NumberProxy` carries
its Python type and the value it had when the trace was recorded (guards compare against it).
Shapes may hold `NumberProxy` sizes (from symbolic split sizes or slice bounds).
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from compiler import dtypes
from compiler.errors import TracingError, called_at

# ---------------------------------------------------------------------------------------------
# Tracing context: fresh names and the list bound symbols are recorded into.


class TraceContext:
    """Hands out fresh proxy names and collects the bound symbols recorded while it is current.

    `producers` maps `id(proxy)` to the prim that defined it (ops are skipped: their outputs map
    to the prim inside them); the tracer follows it to find what a tensor is a view of.
    """

    def __init__(self, reserved: set[str] | frozenset[str] = frozenset()) -> None:
        self._names: set[str] = set(reserved)
        self._counters: dict[str, int] = {}
        self._scopes: list[list[BoundSymbol]] = [[]]
        self.producers: dict[int, BoundSymbol] = {}

    @property
    def bsyms(self) -> list[BoundSymbol]:
        """The top-level bound symbols recorded so far."""
        return self._scopes[0]

    def fresh(self, prefix: str) -> str:
        """A name `prefix<k>` not used before in this context."""
        while True:
            k = self._counters.get(prefix, 0)
            self._counters[prefix] = k + 1
            name = f"{prefix}{k}"
            if name not in self._names:
                self._names.add(name)
                return name

    def claim(self, name: str) -> str:
        """`name` itself if it is free and a valid identifier, otherwise a fresh variant of it."""
        if name.isidentifier() and name not in self._names and name not in _RESERVED_WORDS:
            self._names.add(name)
            return name
        base = name if name.isidentifier() else "a"
        return self.fresh(base + "_")

    def record(self, bsym: BoundSymbol) -> None:
        """Appends `bsym` to the innermost open scope."""
        self._scopes[-1].append(bsym)
        if not isinstance(bsym.sym, Symbol):
            for p in proxies_in(bsym.output):
                self.producers.setdefault(id(p), bsym)

    @contextlib.contextmanager
    def scope(self) -> Iterator[list[BoundSymbol]]:
        """Collects the bound symbols recorded inside the block into the yielded list."""
        collected: list[BoundSymbol] = []
        self._scopes.append(collected)
        try:
            yield collected
        finally:
            self._scopes.pop()


_RESERVED_WORDS = frozenset({"torch", "prims", "math", "inf", "nan"})
_local = threading.local()


def current() -> TraceContext | None:
    """The context being traced into on this thread, or None outside tracing."""
    return getattr(_local, "context", None)


@contextlib.contextmanager
def tracing(context: TraceContext) -> Iterator[TraceContext]:
    """Makes `context` current for the block (contexts nest)."""
    previous = current()
    _local.context = context
    try:
        yield context
    finally:
        _local.context = previous


def _fresh(prefix: str) -> str:
    context = current()
    if context is None:
        context = _scratch
    return context.fresh(prefix)


_scratch = TraceContext()

# ---------------------------------------------------------------------------------------------
# Proxies


class Proxy:
    """A named value of a trace; used as is for opaque Python values (argument containers)."""

    __slots__ = ("name",)

    def __init__(self, name: str | None = None) -> None:
        self.name = name if name is not None else _fresh("p")

    def __repr__(self) -> str:
        return self.name

    def type_string(self) -> str:
        """What the printed trace says about this value in comments."""
        return "object"


def _dispatch(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    from compiler.ops import dispatch

    return dispatch(fn, args, kwargs)


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
        self.name = name if name is not None else _fresh("t")
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

    def size(self, dim: int | None = None) -> Any:
        if dim is None:
            return self.shape
        return self.shape[dim]

    def numel(self) -> Any:
        return functools.reduce(lambda a, b: a * b, self.shape, 1)

    def element_size(self) -> int:
        return self.dtype.itemsize

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def T(self) -> TensorProxy:
        return _dispatch(torch.Tensor.permute, self, *reversed(range(self.ndim)))

    @property
    def mT(self) -> TensorProxy:
        return _dispatch(torch.Tensor.transpose, self, -2, -1)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError(f"len() of a 0-d tensor{called_at()}")
        return int(self.shape[0])

    def __iter__(self) -> Iterator[TensorProxy]:
        return (self[i] for i in range(len(self)))

    # values that tracing cannot know ---------------------------------------------------------
    def __bool__(self) -> bool:
        raise _value_error("bool(tensor) (an `if` or `while` on a tensor)")

    def __int__(self) -> int:
        raise _value_error("int(tensor)")

    def __float__(self) -> float:
        raise _value_error("float(tensor)")

    def __index__(self) -> int:
        raise _value_error("using a tensor as an index")

    def item(self) -> Any:
        raise _value_error("tensor.item()")

    def tolist(self) -> Any:
        raise _value_error("tensor.tolist()")

    def numpy(self) -> Any:
        raise _value_error("tensor.numpy()")

    # everything else goes through the ops table ---------------------------------------------
    @classmethod
    def __torch_function__(cls, func: Callable, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        return _dispatch(func, *args, **(kwargs or {}))

    def __getattr__(self, name: str) -> Any:
        method = getattr(torch.Tensor, name, None) if not name.startswith("_") else None
        if method is None or not callable(method):
            raise AttributeError(f"'TensorProxy' object has no attribute '{name}'")
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
    "__abs__",
    "__invert__",
    "__and__",
    "__rand__",
    "__or__",
    "__ror__",
    "__xor__",
    "__rxor__",
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
        self.name = name if name is not None else _fresh(prefix)
        self.python_type = python_type
        self.value = value

    __hash__ = object.__hash__

    def type_string(self) -> str:
        return f"{self.python_type.__name__} {self.value!r}"

    def _guarded(self) -> Any:
        from compiler import prims

        prims.check_value(self, self.value)
        return self.value

    def __bool__(self) -> bool:
        if self.python_type is bool:
            return self._guarded()
        return bool(_number_op("ne", self, 0))

    def __index__(self) -> int:
        check_int = self.python_type in (int, bool)
        if not check_int:
            raise TypeError(f"a float ({self.name}) cannot be used as an index{called_at()}")
        return int(self._guarded())

    def __int__(self) -> int:
        return int(self._guarded())

    def __float__(self) -> float:
        return float(self._guarded())

    def __round__(self, ndigits: int | None = None) -> Any:
        return round(self._guarded(), ndigits)


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
    "maximum": (None, None),
    "minimum": (None, None),
    "eq": ("__eq__", None),
    "ne": ("__ne__", None),
    "lt": ("__lt__", None),
    "le": ("__le__", None),
    "gt": ("__gt__", None),
    "ge": ("__ge__", None),
}
_IDENTITIES = {"add": 0, "sub": 0, "mul": 1, "div": 1, "floor_divide": 1}


def _number_op(prim_name: str, a: Any, b: Any) -> Any:
    """Records `prim_name(a, b)` on numbers, folding `x + 0`, `x * 1` and friends to `x`."""
    from compiler import prims

    numbers = (int, float, bool, NumberProxy)
    if not isinstance(b, numbers) or not isinstance(a, numbers):
        return NotImplemented
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
    return getattr(prims, prim_name)(a, b)


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
    from compiler import prims

    return prims.abs(self)


NumberProxy.__neg__ = lambda self: _number_op("mul", self, -1)
NumberProxy.__pos__ = lambda self: self
NumberProxy.__abs__ = _number_abs


def proxies_in(value: Any) -> Iterator[Proxy]:
    """The proxies inside a (nested tuple / list / dict / slice) value, in order."""
    if isinstance(value, Proxy):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from proxies_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from proxies_in(item)
    elif isinstance(value, slice):
        yield from proxies_in((value.start, value.stop, value.step))


def map_proxies(value: Any, fn: Callable[[Proxy], Any]) -> Any:
    """`value` with every proxy inside replaced by `fn(proxy)` (containers rebuilt, not mutated)."""
    if isinstance(value, Proxy):
        return fn(value)
    if isinstance(value, tuple):
        return tuple(map_proxies(v, fn) for v in value)
    if isinstance(value, list):
        return [map_proxies(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: map_proxies(v, fn) for k, v in value.items()}
    if isinstance(value, slice):
        return slice(*(map_proxies(v, fn) for v in (value.start, value.stop, value.step)))
    return value


# ---------------------------------------------------------------------------------------------
# Bound symbols and traces


@dataclass(frozen=True)
class Symbol:
    """A callee that is not a prim: a torch-level op (printed by its torch name, lowered to its
    subsymbols) or an executor's region (printed by its name, run by `impl`)."""

    name: str
    impl: Callable | None = field(default=None, compare=False)
    executor: str | None = None

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True, eq=False)
class BoundSymbol:
    """One line of a trace: `output = sym(*args, **kwargs)`, with the decomposition it stands for."""

    sym: Any  # a Prim or a Symbol
    args: tuple
    kwargs: dict
    output: Any
    subsymbols: tuple[BoundSymbol, ...] = ()

    @property
    def inputs(self) -> list[Proxy]:
        """The proxies this line reads, in order (with repeats)."""
        return [*proxies_in(self.args), *proxies_in(self.kwargs)]

    @property
    def outputs(self) -> list[Proxy]:
        """The proxies this line defines."""
        return list(proxies_in(self.output))

    def replace(self, **changes: Any) -> BoundSymbol:
        """A copy with some fields changed."""
        return replace(self, **changes)

    def __str__(self) -> str:
        return "\n".join(bsym_lines(self))


@dataclass
class Trace:
    """A straight-line program: inputs (proxies), bound symbols, and an output value tree."""

    inputs: tuple[Proxy, ...]
    bsyms: list[BoundSymbol]
    output: Any
    name: str = "computation"
    provenance: str = "tracing"

    def with_bsyms(self, bsyms: list[BoundSymbol], output: Any = None, **changes: Any) -> Trace:
        """A new trace with these bound symbols (and output, when given)."""
        return replace(self, bsyms=bsyms, output=self.output if output is None else output, **changes)

    def names(self) -> frozenset[str]:
        """Every proxy name used in the trace (for making fresh names in passes)."""
        names = {p.name for p in self.inputs}
        for bsym in self.bsyms:
            stack = [bsym]
            while stack:
                b = stack.pop()
                names.update(p.name for p in b.outputs)
                names.update(p.name for p in b.inputs)
                stack.extend(b.subsymbols)
        return frozenset(names)

    def __str__(self) -> str:
        return trace_source(self)

    def python(self, **namespace: Any) -> Callable:
        """Executes the printed source and returns the function it defines (for tests and repros)."""
        scope: dict[str, Any] = dict(namespace)
        exec(compile(str(self), f"<trace {self.name}>", "exec"), scope)
        return scope[self.name]


# ---------------------------------------------------------------------------------------------
# Printing


def value_source(value: Any) -> str:
    """Python source for a constant or proxy tree (proxies print as their names)."""
    if isinstance(value, Proxy):
        return value.name
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else f"float('{value}')"
    if value is None or isinstance(value, (bool, int, str, complex)):
        return repr(value)
    if isinstance(value, torch.dtype):
        return str(value)
    if isinstance(value, torch.device):
        return f"torch.device('{value}')"
    if isinstance(value, tuple):
        items = [value_source(v) for v in value]
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
    if isinstance(value, list):
        return f"[{', '.join(value_source(v) for v in value)}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{value_source(k)}: {value_source(v)}" for k, v in value.items()) + "}"
    if isinstance(value, slice):
        return f"slice({value_source(value.start)}, {value_source(value.stop)}, {value_source(value.step)})"
    if value is Ellipsis:
        return "..."
    if isinstance(value, type):
        return value.__name__
    return repr(value)


def callee_name(sym: Any) -> str:
    """How a symbol is called in printed source: prims by `prims.<name>`, others by their name."""
    return sym.name if isinstance(sym, Symbol) else f"prims.{sym.value}"


def bsym_lines(bsym: BoundSymbol, depth: int = 0) -> list[str]:
    """The printed lines of one bound symbol; its decomposition follows as indented comments."""
    args = [value_source(a) for a in bsym.args]
    args += [f"{k}={value_source(v)}" for k, v in bsym.kwargs.items()]
    call = f"{callee_name(bsym.sym)}({', '.join(args)})"
    output = bsym.output
    if output is None:
        line = call
    elif isinstance(output, Proxy):
        line = f"{output.name} = {call}"
    else:
        names = [value_source(o) for o in output]
        target = names[0] + "," if len(names) == 1 else ", ".join(names)
        line = f"{target} = {call}" if names else call
    types = ", ".join(f"{p.name}: {p.type_string()}" for p in bsym.outputs if type(p) is not Proxy)
    if types:
        line += f"  # {types}"
    prefix = "  # " + "  " * (depth - 1) if depth else ""
    lines = [prefix + line]
    for sub in bsym.subsymbols:
        lines += bsym_lines(sub, depth + 1)
    return lines


def trace_source(trace: Trace) -> str:
    """The whole trace as a Python module defining one function named after the trace."""
    lines = [f"# Constructed by {trace.provenance}", "import torch", "from compiler import prims", ""]
    lines.append(f"def {trace.name}({', '.join(p.name for p in trace.inputs)}):")
    for proxy in trace.inputs:
        if type(proxy) is not Proxy:
            lines.append(f"  # {proxy.name}: {proxy.type_string()}")
    for bsym in trace.bsyms:
        lines += ["  " + line for line in bsym_lines(bsym)]
    lines.append(f"  return {value_source(trace.output)}")
    return "\n".join(lines) + "\n"
