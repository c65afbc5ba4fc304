"""The op registry: torch callables -> decompositions into prims, and `dispatch`, which runs one.

`OPS` maps the torch callables a user program reaches (`torch.add`, `torch.Tensor.add`,
`torch.Tensor.__add__`, `torch.nn.functional.gelu`, ...) to decomposition functions with torch's
signature. `dispatch` is what proxies and the tracing mode call: it runs the decomposition over
proxies and records one bound symbol named after the torch function whose subsymbols are the
prims (and nested ops) the decomposition recorded. An op that returns only values defined before
it (an in-place op returns its target) is recorded with no output. `out=` is handled here for
every op whose decomposition declares an `out` parameter: the op runs without it and its result
is written into `out` (see ops/writes.py), so decompositions never see `out`.
"""

from __future__ import annotations

import builtins
import functools
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from compiler import prims
from compiler.core import ir
from compiler.core.errors import ATTRIBUTE_HINTS, TracingError, as_op_error, called_at, check
from compiler.core.ir import BoundSymbol, NumberProxy, Proxy, Symbol, TensorProxy
from compiler.ops import autocast, complex_proxy, eager_layouts, known_values
from compiler.ops.program_grad import grad_off_by_program
from compiler.ops.writes import write_out
from compiler.prims import GUARDS, Prim


@dataclass(frozen=True)
class Op:
    """A registered torch-level operation: its printed name, its decomposition, its trace symbol."""

    name: str
    impl: Callable
    symbol: Symbol


OPS: dict[Any, Op] = {}
# Operators a library defines when it is imported (`torch.ops.<namespace>.<name>`, e.g. the ones
# transformers registers), by "namespace::name": looked up when a call is not in OPS, so
# registering them needs no import of the library.
CUSTOM_OPS: dict[str, Op] = {}
# Calls on complex values (ops/complex_numbers.py): each a decomposition into calls on the values'
# real and imaginary parts (`ComplexProxy`), recorded as those calls, so no complex tensor reaches a
# trace. A call goes here when a complex value is among its arguments, or when a complex dtype or
# Python complex number is and the op has a decomposition here, or for the ops that make complex
# values of real ones (`COMPLEX_MAKERS`: torch.view_as_complex, torch.polar, torch.complex).
COMPLEX_OPS: dict[Any, Op] = {}
COMPLEX_MAKERS: set[Any] = set()
# Lookups for calls that are in no table: each returns the Op for a callable or None (ops/inplace.py
# adds the one that runs `x.name_(...)` as the registered `x.name(...)` written into `x`).
RESOLVERS: list[Callable[[Any], Op | None]] = []


def resolve(name: str) -> Any:
    """The object a dotted name such as 'torch.nn.functional.gelu' or 'torch.Tensor.add' names."""
    module_name, _, rest = name.partition(".")
    obj: Any = importlib.import_module(module_name)
    for part in rest.split("."):
        obj = getattr(obj, part)
    return obj


def register(*names: str) -> Callable[[Callable], Callable]:
    """Registers the decorated decomposition for each torch callable named in `names`."""

    def decorator(impl: Callable) -> Callable:
        for name in names:
            fn = resolve(name)
            if fn in OPS and OPS[fn].impl is impl:
                continue  # an alias of a name already registered here (Tensor.__neg__ is Tensor.neg)
            check(fn not in OPS, lambda name=name: f"{name} is registered twice", ValueError)
            OPS[fn] = Op(name, impl, Symbol(name))
        return impl

    return decorator


def register_complex(*names: str, makes_complex: bool = False) -> Callable[[Callable], Callable]:
    """Registers the decorated decomposition for calls of each torch callable in `names` on complex
    values; `makes_complex`: also for calls on real values only (it makes complex values of them)."""

    def decorator(impl: Callable) -> Callable:
        for name in names:
            fn = resolve(name)
            if fn in COMPLEX_OPS and COMPLEX_OPS[fn].impl is impl:
                continue
            check(fn not in COMPLEX_OPS, lambda name=name: f"{name} is registered twice for complex values", ValueError)
            COMPLEX_OPS[fn] = Op(name, impl, Symbol(name))
            if makes_complex:
                COMPLEX_MAKERS.add(fn)
        return impl

    return decorator


def register_custom(qualified_name: str) -> Callable[[Callable], Callable]:
    """Registers the decorated decomposition for the operator `namespace::name` (its default overload
    and its overload packet), whether or not the library defining it is imported yet."""
    namespace, separator, name = qualified_name.partition("::")
    check(
        bool(separator and namespace and name) and qualified_name not in CUSTOM_OPS,
        lambda: f"register_custom({qualified_name!r}): expected a new 'namespace::name'",
        ValueError,
    )

    def decorator(impl: Callable) -> Callable:
        printed = f"torch.ops.{namespace}.{name}"
        CUSTOM_OPS[qualified_name] = Op(printed, impl, Symbol(printed))
        return impl

    return decorator


def _custom_op(fn: Any) -> Op | None:
    if isinstance(fn, torch._ops.OpOverloadPacket):
        return CUSTOM_OPS.get(fn._qualified_op_name)
    if isinstance(fn, torch._ops.OpOverload) and fn._overloadname == "default":
        return CUSTOM_OPS.get(fn._schema.name)
    return None


def lookup(fn: Any) -> Op | None:
    """The Op that runs calls of `fn` on real values: its entry in `OPS` or `CUSTOM_OPS`, else the
    first `RESOLVERS` answer; None where `fn` has no decomposition."""
    op = OPS.get(fn) or _custom_op(fn)
    if op is None:
        for resolver in RESOLVERS:
            op = resolver(fn)
            if op is not None:
                break
    return op


def _tensor_attribute(fn: Any) -> str | None:
    """The attribute `fn` reads where it is a tensor attribute's getter (`.grad` of a tensor the
    program captured), else None."""
    owner = getattr(fn, "__self__", None)
    if type(owner).__name__ == "getset_descriptor" and getattr(fn, "__name__", "") == "__get__":
        return owner.__name__
    return None


def torch_name(fn: Any) -> str:
    """A readable dotted name for a torch callable (for error messages)."""
    if isinstance(fn, torch._ops.OpOverloadPacket):
        return "torch.ops." + fn._qualified_op_name.replace("::", ".")
    if isinstance(fn, torch._ops.OpOverload):
        return f"torch.ops.{fn._schema.name.replace('::', '.')}.{fn._overloadname}"
    attribute = _tensor_attribute(fn)
    if attribute is not None:
        return f"reading tensor.{attribute}"
    module = getattr(fn, "__module__", None) or ""
    qualname = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))
    if module.startswith("torch._C") or module == "torch.functional" or qualname.startswith("_Variable"):
        qualname = qualname.split(".")[-1]
        submodule = module.removeprefix("torch._C._") if module.startswith("torch._C._") else ""
        if submodule and submodule != "VariableFunctions":
            qualname = qualname.removeprefix(submodule + "_")
            module = "torch.nn.functional" if submodule == "nn" else f"torch.{submodule}"
        else:
            module = "torch"
    elif qualname.startswith(("TensorBase.", "_TensorBase.")):
        module, qualname = "torch.Tensor", qualname.split(".", 1)[1]
    elif qualname.startswith("Tensor."):
        module = "torch"
    return f"{module}.{qualname}" if module else qualname


_builtin_isinstance = builtins.isinstance


def _contains(value: Any, kind: type | tuple[type, ...]) -> bool:
    # NOTE: the builtin isinstance, not the one tracing installs for the program's code
    # (tracing/patches.py): the compiler's own code sees proxies as they are.
    isinstance = _builtin_isinstance
    if isinstance(value, kind):
        return True
    if isinstance(value, (tuple, list)):
        for v in value:
            if _contains(v, kind):
                return True
    elif isinstance(value, dict):
        for v in value.values():
            if _contains(v, kind):
                return True
    return False


def dispatch(fn: Any, args: tuple, kwargs: dict) -> Any:
    """Runs the decomposition registered for `fn` and records it as one bound symbol (a call on
    complex values: as the calls on their parts it is made of, `COMPLEX_OPS`). `fn` may be the
    tracer's stand-in for a torch builtin (tracing/patches.py), which names the builtin."""
    fn = getattr(fn, "__fusebench_builtin__", fn)
    context = ir.current()
    if context is not None and context.seen_op is not None:
        context.seen_op()
    if kwargs.get("dtype") in _PYTHON_DTYPES:
        kwargs = {**kwargs, "dtype": _PYTHON_DTYPES[kwargs["dtype"]]}
    if _contains(args, torch.Tensor) or _contains(kwargs, torch.Tensor):
        args, kwargs = _captured(fn, args, kwargs)
    if fn in COMPLEX_MAKERS or _on_complex_values(fn, args, kwargs):
        return _dispatch_complex(fn, args, kwargs)
    op = lookup(fn)
    traced = _contains(args, Proxy) or _contains(kwargs, Proxy)
    if op is None:
        if not traced:
            # Metadata helpers (torch.promote_types, torch.finfo, ...) simply run.
            result = fn(*args, **kwargs)
            if not _contains(result, torch.Tensor):
                return result
        hint = ATTRIBUTE_HINTS.get(_tensor_attribute(fn) or "", "")
        raise NotImplementedError(f"{torch_name(fn)} is not supported by the fusebench compiler{called_at()}{hint}")
    _check_no_tensors(op, args, kwargs)
    check(context is not None, lambda: f"{op.name} was called on proxies outside of tracing", TracingError)
    if kwargs and not _NUMPY_NAMES.keys().isdisjoint(kwargs):
        kwargs = _torch_names(op.impl, kwargs)
    if any(_is_numpy_scalar(a) for a in args) or any(_is_numpy_scalar(v) for v in kwargs.values()):
        args, kwargs = _python_numbers(args), dict(zip(kwargs, _python_numbers(tuple(kwargs.values()))))
    args, kwargs = autocast.cast_arguments(op.name, args, kwargs)
    if kwargs.get("out") is not None and _accepts_out(op.impl):
        return _dispatch_out(op, fn, args, kwargs)
    with context.scope() as recorded:
        try:
            output = op.impl(*args, **kwargs)
        except (ValueError, TypeError) as error:
            raise as_op_error(error) from error.__cause__
    recorded = _hoist_scalar_work(context, recorded)
    known_values.after_op(fn, args, kwargs, output, recorded)
    if recorded:
        defined = {id(p) for bsym in recorded for p in ir.defined_proxies(bsym)}
        outputs = list(ir.proxies_in(output))
        new = [p for p in outputs if id(p) in defined]
        _check_real(op, new)
        eager_layouts.after_op(op.name, args, new)
        if len(new) == len(outputs):
            context.record(BoundSymbol(op.symbol, args, kwargs, output, tuple(recorded)))
        elif not new:
            # NOTE: recording a value defined before the op as its output would assign that
            # name twice; the op defines nothing (an in-place op returns its target).
            context.record(BoundSymbol(op.symbol, args, kwargs, None, tuple(recorded)))
        else:
            for bsym in recorded:
                context.record(bsym)
        if grad_off_by_program():
            output = _without_gradient(output, {id(p) for p in new})
    return output


# NOTE: torch's argument parser takes a Python number type for a dtype (`torch.zeros(n, dtype=int)`,
# as transformers' chunked attention mask is made); a decomposition is written for torch dtypes
_PYTHON_DTYPES = {int: torch.int64, float: torch.float64, bool: torch.bool, complex: torch.complex128}


def _on_complex_values(fn: Any, args: tuple, kwargs: dict) -> bool:
    values, numbers = complex_proxy.scan(args, kwargs)
    return values or (numbers and fn in COMPLEX_OPS)


def _dispatch_complex(fn: Any, args: tuple, kwargs: dict) -> Any:
    """`fn` on complex values: its decomposition in `COMPLEX_OPS`, whose calls on the parts are
    recorded as the program's own calls are."""
    op = COMPLEX_OPS.get(fn)
    if op is None:
        name = torch_name(fn)
        if name.endswith("_") or name.rsplit(".", 1)[-1] in _WRITES:
            raise NotImplementedError(
                f"{name}: writing into a complex tensor is not supported by the fusebench compiler{called_at()}"
            )
        raise NotImplementedError(f"{name} on complex tensors is not supported by the fusebench compiler{called_at()}")
    _check_no_tensors(op, args, kwargs)
    check(ir.current() is not None, lambda: f"{op.name} was called on proxies outside of tracing", TracingError)
    if kwargs and not _NUMPY_NAMES.keys().isdisjoint(kwargs):
        kwargs = _torch_names(op.impl, kwargs)
    return op.impl(*args, **kwargs)


def _captured(fn: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """`(args, kwargs)` with the real tensors the program read from an attribute, a global or a
    closure replaced by the trace's inputs for them (tracing/captured_tensors.py), where `fn` has a
    decomposition; unchanged otherwise (a helper such as `torch.is_tensor` runs on them as is, and
    `_check_no_tensors` refuses an op given a tensor without such a place)."""
    context = ir.current()
    if context is None or context.captured is None:
        return args, kwargs
    if not (fn in COMPLEX_OPS or fn in COMPLEX_MAKERS or lookup(fn) is not None):
        return args, kwargs
    replaced = context.captured(args, kwargs)
    return replaced if replaced is not None else (args, kwargs)


def _check_no_tensors(op: Op, args: tuple, kwargs: dict) -> None:
    if _contains(args, torch.Tensor) or _contains(kwargs, torch.Tensor):
        raise TracingError(
            f"{op.name} received a real torch.Tensor that is not an argument of the jitted function "
            f"(a global, a closure or an attribute){called_at()}; pass it to the function as an argument"
        )


_WRITES = frozenset({"__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__"})


def _check_real(op: Op, outputs: list) -> None:
    """Refuses a complex tensor made by an op without a complex decomposition (a factory given a
    complex dtype): traces hold real tensors only (see `COMPLEX_OPS`)."""
    for p in outputs:
        check(
            not (isinstance(p, TensorProxy) and getattr(p.dtype, "is_complex", False)),
            lambda p=p: f"{op.name} making a {p.dtype} tensor is not supported by the fusebench compiler{called_at()}",
            NotImplementedError,
        )


def _without_gradient(output: Any, new: set[int]) -> Any:
    """`output` with the floating tensors the op made behind `prims.stop_gradient`: the program
    made them with grad turned off, so eager's autograd sees constants."""

    def cut(p: Any) -> Any:
        if id(p) in new and isinstance(p, ir.TensorProxy) and p.dtype.is_floating_point:
            return prims.stop_gradient(p)
        return p

    return ir.map_proxies(output, cut)


@functools.cache
def _accepts_out(impl: Callable) -> bool:
    return "out" in inspect.signature(impl).parameters


# NOTE: torch's argument parser takes NumPy's names for these parameters of every function it
# parses (`torch.cat(xs, axis=1)`, `x.sum(axis=0, keepdims=True)`), and programs use them
# (transformers' Funnel); a decomposition is written with torch's names.
def _is_numpy_scalar(value: Any) -> bool:
    return type(value).__module__ == "numpy" and hasattr(value, "item") and getattr(value, "ndim", None) == 0


def _python_numbers(values: tuple) -> tuple:
    """`values` with NumPy scalars (`np.float64(2.0)`, `np.int64(3)`) as the Python numbers they hold:
    torch takes them so (CTRL scales its embeddings by `np.sqrt(d_model)`), while the compiler's type
    promotion knows Python's number types only."""
    return tuple(value.item() if _is_numpy_scalar(value) else value for value in values)


_NUMPY_NAMES = {"axis": "dim", "keepdims": "keepdim", "x": "input", "a": "input", "x1": "input", "x2": "other"}


@functools.cache
def _parameters(impl: Callable) -> frozenset[str]:
    return frozenset(inspect.signature(impl).parameters)


def _torch_names(impl: Callable, kwargs: dict) -> dict:
    """`kwargs` with NumPy's parameter names the decomposition does not take given torch's names."""
    accepted = _parameters(impl)
    renamed = {}
    for key, value in kwargs.items():
        torch_key = _NUMPY_NAMES.get(key)
        use_torch_name = torch_key is not None and key not in accepted and torch_key in accepted
        check(
            not (use_torch_name and torch_key in kwargs),
            lambda key=key, torch_key=torch_key: f"{torch_key} given twice (also as {key}=){called_at()}",
            TypeError,
        )
        renamed[torch_key if use_torch_name else key] = value
    return renamed


def _dispatch_out(op: Op, fn: Any, args: tuple, kwargs: dict) -> Any:
    """`fn(*args, out=o)`: the op without `out`, then its result written into `o`; returns `o`."""
    context = ir.current()
    functional_kwargs = {k: v for k, v in kwargs.items() if k != "out"}
    with context.scope() as recorded:
        result = dispatch(fn, args, functional_kwargs)
        out = write_out(kwargs["out"], result, f"{op.name}(out=...)")
    recorded = _hoist_scalar_work(context, recorded)
    known_values.after_op(fn, args, kwargs, out, recorded)  # the write into `out` forgets its value
    context.record(BoundSymbol(op.symbol, args, kwargs, None, tuple(recorded)))
    return out


def _hoist_scalar_work(context: ir.TraceContext, recorded: list[BoundSymbol]) -> list[BoundSymbol]:
    """Records number arithmetic and guards in the enclosing scope; returns the op's tensor work.

    NOTE: a size an op computes (a split section, a slice length) appears in its outputs' shapes
    and later ops read it; as a subsymbol it would be invisible outside the op's decomposition.
    """
    kept = []
    for bsym in recorded:
        outputs = bsym.outputs
        scalar = isinstance(bsym.sym, Prim) and (
            bsym.sym in GUARDS or (outputs and all(isinstance(p, NumberProxy) for p in outputs))
        )
        if scalar:
            context.record(bsym)
        else:
            kept.append(bsym)
    return kept
