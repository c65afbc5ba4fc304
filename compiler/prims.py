"""The prims: the `Prim` enum, ONE meta table (shape / dtype / device inference), number semantics.

Prims are the contract between the ops layer, the passes and the executors. They do no
broadcasting and no type promotion: elementwise prims take tensors of one shape and dtype (and
Python numbers or NumberProxy scalars); the ops layer inserts `broadcast_in_dim` and
`convert_element_type` to get there. Shapes, dims and perms are passed canonicalised
(non-negative dims, full shapes).

`prims.add(a, b)` and friends (served by this module's `__getattr__`) record a bound symbol when
called on proxies during tracing, and compute the value otherwise (numbers are folded in Python,
tensors run through the torch executor), so a printed trace runs as plain Python.
"""

from __future__ import annotations

import builtins
import enum
import math
import operator
from collections.abc import Callable
from typing import Any

import torch

from compiler import dtypes, ir
from compiler.errors import check
from compiler.ir import BoundSymbol, NumberProxy, TensorProxy


class Prim(enum.Enum):
    """Every primitive operation; the value is the name printed in traces (`prims.<value>`)."""

    # elementwise unary
    NEG = "neg"
    ABS = "abs"
    EXP = "exp"
    EXP2 = "exp2"
    LOG = "log"
    LOG1P = "log1p"
    SQRT = "sqrt"
    RSQRT = "rsqrt"
    SIN = "sin"
    COS = "cos"
    TANH = "tanh"
    ERF = "erf"
    RECIPROCAL = "reciprocal"
    FLOOR = "floor"
    CEIL = "ceil"
    TRUNC = "trunc"
    SIGN = "sign"
    BITWISE_NOT = "bitwise_not"
    # elementwise binary
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    FLOOR_DIVIDE = "floor_divide"
    REMAINDER = "remainder"
    FMOD = "fmod"
    POW = "pow"
    MAXIMUM = "maximum"
    MINIMUM = "minimum"
    EQ = "eq"
    NE = "ne"
    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"
    BITWISE_AND = "bitwise_and"
    BITWISE_OR = "bitwise_or"
    BITWISE_XOR = "bitwise_xor"
    # elementwise ternary and conversion
    WHERE = "where"
    CONVERT_ELEMENT_TYPE = "convert_element_type"
    # reductions
    SUM = "sum"
    PROD = "prod"
    AMAX = "amax"
    AMIN = "amin"
    ARGMAX = "argmax"
    # shapes
    BROADCAST_IN_DIM = "broadcast_in_dim"
    RESHAPE = "reshape"
    PERMUTE = "permute"
    SLICE = "slice"
    SQUEEZE = "squeeze"
    CAT = "cat"
    # indexing
    INDEX_SELECT = "index_select"
    INDEX_COPY = "index_copy"
    INDEX_ADD = "index_add"
    TAKE_ALONG_DIM = "take_along_dim"
    # linear algebra and attention
    MATMUL = "matmul"
    LINEAR = "linear"
    SDPA = "sdpa"
    # factories
    FULL = "full"
    EMPTY = "empty"
    IOTA = "iota"
    # a copy of a tensor with a strided region replaced (the functional form of writing a slice)
    SLICE_UPDATE = "slice_update"
    # in-place: `copy_(target, value)` overwrites `target`, seen through every alias of it. Only
    # traces straight from the frontend hold it; functionalization removes it.
    COPY_ = "copy_"
    # in-place write-back of a computed value into a buffer the caller can observe
    COPY_TO = "copy_to"
    # prologue: unpacking arguments and guards
    UNPACK_SEQUENCE = "unpack_sequence"
    UNPACK_DICT = "unpack_dict"
    CHECK_TENSOR = "check_tensor"
    CHECK_TYPE = "check_type"
    CHECK_VALUE = "check_value"
    CHECK_STRIDES = "check_strides"
    CHECK_ALIASING = "check_aliasing"


UNARY = frozenset(
    {Prim.NEG, Prim.ABS, Prim.EXP, Prim.EXP2, Prim.LOG, Prim.LOG1P, Prim.SQRT, Prim.RSQRT, Prim.SIN,
     Prim.COS, Prim.TANH, Prim.ERF, Prim.RECIPROCAL, Prim.FLOOR, Prim.CEIL, Prim.TRUNC, Prim.SIGN,
     Prim.BITWISE_NOT}
)  # fmt: skip
COMPARISONS = frozenset({Prim.EQ, Prim.NE, Prim.LT, Prim.LE, Prim.GT, Prim.GE})
BINARY = frozenset(
    {Prim.ADD, Prim.SUB, Prim.MUL, Prim.DIV, Prim.FLOOR_DIVIDE, Prim.REMAINDER, Prim.FMOD, Prim.POW,
     Prim.MAXIMUM, Prim.MINIMUM, Prim.BITWISE_AND, Prim.BITWISE_OR, Prim.BITWISE_XOR}
) | COMPARISONS  # fmt: skip
ELEMENTWISE = UNARY | BINARY | {Prim.WHERE, Prim.CONVERT_ELEMENT_TYPE}
REDUCTIONS = frozenset({Prim.SUM, Prim.PROD, Prim.AMAX, Prim.AMIN, Prim.ARGMAX})
SHAPE_OPS = frozenset({Prim.BROADCAST_IN_DIM, Prim.RESHAPE, Prim.PERMUTE, Prim.SLICE, Prim.SQUEEZE, Prim.CAT})
FACTORIES = frozenset({Prim.FULL, Prim.EMPTY, Prim.IOTA})
GUARDS = frozenset({Prim.CHECK_TENSOR, Prim.CHECK_TYPE, Prim.CHECK_VALUE, Prim.CHECK_STRIDES, Prim.CHECK_ALIASING})
PROLOGUE_ONLY = GUARDS | {Prim.UNPACK_SEQUENCE, Prim.UNPACK_DICT}
# The IR's aliasing rule: the output of a view prim aliases its first argument (writing into one
# changes the other); every other prim returns a fresh tensor. passes/functionalize.py relies on
# it, and the tracer (compiler/aliasing.py) keeps it true to eager PyTorch.
VIEWS = frozenset({Prim.SLICE, Prim.RESHAPE, Prim.PERMUTE, Prim.SQUEEZE, Prim.BROADCAST_IN_DIM})
# Prims that mutate their arguments; none survives functionalization.
INPLACE = frozenset({Prim.COPY_})
# Prims kept by dead-code elimination even when nothing reads their outputs (unpacking checks
# the length or keys of what it unpacks).
SIDE_EFFECTS = set(PROLOGUE_ONLY) | INPLACE | {Prim.COPY_TO}


def _sign(x: Any) -> Any:
    return x if x != x else (x > 0) - (x < 0)  # NaN stays NaN


def _fmod(a: Any, b: Any) -> Any:
    return math.fmod(a, b) if isinstance(a, float) or isinstance(b, float) else int(math.fmod(a, b))


# What each prim means on Python numbers: folds constants and gives NumberProxy values.
NUMBER_IMPLS: dict[Prim, Callable] = {
    Prim.NEG: operator.neg,
    Prim.ABS: builtins.abs,
    Prim.EXP: math.exp,
    Prim.EXP2: lambda x: 2.0**x,
    Prim.LOG: math.log,
    Prim.LOG1P: math.log1p,
    Prim.SQRT: math.sqrt,
    Prim.RSQRT: lambda x: 1 / math.sqrt(x),
    Prim.SIN: math.sin,
    Prim.COS: math.cos,
    Prim.TANH: math.tanh,
    Prim.ERF: math.erf,
    Prim.RECIPROCAL: lambda x: 1 / x,
    Prim.FLOOR: math.floor,
    Prim.CEIL: math.ceil,
    Prim.TRUNC: math.trunc,
    Prim.SIGN: _sign,
    Prim.BITWISE_NOT: operator.invert,
    Prim.ADD: operator.add,
    Prim.SUB: operator.sub,
    Prim.MUL: operator.mul,
    Prim.DIV: operator.truediv,
    Prim.FLOOR_DIVIDE: operator.floordiv,
    Prim.REMAINDER: operator.mod,
    Prim.FMOD: _fmod,
    Prim.POW: operator.pow,
    Prim.MAXIMUM: builtins.max,
    Prim.MINIMUM: builtins.min,
    Prim.EQ: operator.eq,
    Prim.NE: operator.ne,
    Prim.LT: operator.lt,
    Prim.LE: operator.le,
    Prim.GT: operator.gt,
    Prim.GE: operator.ge,
    Prim.BITWISE_AND: operator.and_,
    Prim.BITWISE_OR: operator.or_,
    Prim.BITWISE_XOR: operator.xor,
    Prim.WHERE: lambda c, a, b: a if c else b,
    Prim.CONVERT_ELEMENT_TYPE: lambda x, t: t(x),
}

# ---------------------------------------------------------------------------------------------
# Meta functions


def same_size(a: Any, b: Any) -> bool:
    """Whether two sizes are equal; comparing a NumberProxy records a guard."""
    return a is b or bool(a == b)


def _check_same_shape(prim: Prim, tensors: list[TensorProxy], same_dtype: bool = True) -> None:
    first = tensors[0]
    for t in tensors[1:]:
        check(
            len(t.shape) == len(first.shape) and builtins.all(map(same_size, t.shape, first.shape)),
            lambda t=t: (
                f"prims.{prim.value}: {first.name} has shape {first.shape} but {t.name} has "
                f"shape {t.shape}; prims do not broadcast"
            ),
            ValueError,
        )
        check(
            not same_dtype or t.dtype == first.dtype,
            lambda t=t: (
                f"prims.{prim.value}: {first.name} is {first.dtype} but {t.name} is "
                f"{t.dtype}; prims do not promote types"
            ),
            TypeError,
        )
        check(
            t.device == first.device,
            lambda t=t: f"prims.{prim.value}: {first.name} is on {first.device} but {t.name} is on {t.device}",
            ValueError,
        )


def _number_value(x: Any) -> Any:
    return x.value if isinstance(x, NumberProxy) else x


def _number_meta(prim: Prim, args: tuple) -> NumberProxy:
    value = NUMBER_IMPLS[prim](*(_number_value(a) for a in args))
    return NumberProxy(type(value), value)


def _elementwise_meta(prim: Prim) -> Callable:
    def meta(*args: Any) -> Any:
        tensors = [a for a in args if isinstance(a, TensorProxy)]
        if not tensors:
            return _number_meta(prim, args)
        for a in args:
            check(
                isinstance(a, (TensorProxy, NumberProxy, int, float, bool)),
                lambda a=a: f"prims.{prim.value}: expected tensors and numbers, got {type(a).__name__} {a!r}",
                TypeError,
            )
        _check_same_shape(prim, tensors)
        dtype = torch.bool if prim in COMPARISONS else tensors[0].dtype
        return TensorProxy(tensors[0].shape, dtype, tensors[0].device)

    return meta


def _where_meta(condition: Any, a: Any, b: Any) -> Any:
    tensors = [x for x in (condition, a, b) if isinstance(x, TensorProxy)]
    if not tensors:
        return _number_meta(Prim.WHERE, (condition, a, b))
    check(
        not isinstance(condition, TensorProxy) or condition.dtype == torch.bool,
        lambda: f"prims.where: the condition {condition} must be a bool tensor",
        TypeError,
    )
    data = [x for x in (a, b) if isinstance(x, TensorProxy)]
    check(bool(data), lambda: "prims.where: at least one of the two branches must be a tensor", TypeError)
    _check_same_shape(Prim.WHERE, tensors, same_dtype=False)
    _check_same_shape(Prim.WHERE, data)
    return TensorProxy(tensors[0].shape, data[0].dtype, tensors[0].device)


def _convert_meta(a: Any, dtype: Any) -> Any:
    if isinstance(a, TensorProxy):
        check(isinstance(dtype, torch.dtype), lambda: f"convert_element_type: {dtype!r} is not a torch.dtype")
        return TensorProxy(a.shape, dtype, a.device)
    value = dtype(_number_value(a))
    return NumberProxy(dtype, value)


def _check_dims(name: str, a: TensorProxy, dims: Any) -> None:
    check(
        builtins.all(isinstance(d, int) and 0 <= d < builtins.max(a.ndim, 1) for d in dims)
        and len(set(dims)) == len(dims),
        lambda: f"prims.{name}: dims {dims!r} must be distinct non-negative dims of {a.name} (rank {a.ndim})",
        IndexError,
    )


def _reduction_meta(prim: Prim) -> Callable:
    def meta(a: TensorProxy, dims: tuple[int, ...]) -> TensorProxy:
        _check_dims(prim.value, a, dims)
        shape = [s for i, s in enumerate(a.shape) if i not in dims]
        return TensorProxy(shape, a.dtype, a.device)

    return meta


def _argmax_meta(a: TensorProxy, dim: int | None) -> TensorProxy:
    shape = () if dim is None else [s for i, s in enumerate(a.shape) if i != dim]
    return TensorProxy(shape, torch.int64, a.device)


def _broadcast_in_dim_meta(a: TensorProxy, shape: Any, broadcast_dims: Any) -> TensorProxy:
    check(
        len(broadcast_dims) == a.ndim and list(broadcast_dims) == sorted(set(broadcast_dims)),
        lambda: f"prims.broadcast_in_dim: broadcast_dims {broadcast_dims} must be increasing, one per dim of {a.name}",
        ValueError,
    )
    for i, d in enumerate(broadcast_dims):
        check(
            d < len(shape) and (same_size(a.shape[i], 1) or same_size(a.shape[i], shape[d])),
            lambda i=i, d=d: (
                f"prims.broadcast_in_dim: dim {i} of {a.name} (size {a.shape[i]}) cannot "
                f"broadcast to size {shape[d] if d < len(shape) else '?'}"
            ),
            ValueError,
        )
    return TensorProxy(shape, a.dtype, a.device)


def _product(sizes: Any) -> Any:
    result = 1
    for s in sizes:
        result = result * s
    return result


def _reshape_meta(a: TensorProxy, shape: Any) -> TensorProxy:
    check(
        same_size(_product(a.shape), _product(shape)),
        lambda: f"prims.reshape: cannot reshape {a.name} of shape {a.shape} to {tuple(shape)}",
        ValueError,
    )
    return TensorProxy(shape, a.dtype, a.device)


def _permute_meta(a: TensorProxy, perm: Any) -> TensorProxy:
    check(
        sorted(perm) == list(range(a.ndim)),
        lambda: f"prims.permute: {perm} is not a permutation of {a.name}'s {a.ndim} dims",
        ValueError,
    )
    return TensorProxy([a.shape[p] for p in perm], a.dtype, a.device)


def _slice_meta(a: TensorProxy, starts: Any, ends: Any, steps: Any) -> TensorProxy:
    check(
        len(starts) == len(ends) == len(steps) == a.ndim,
        lambda: f"prims.slice: starts, ends and steps need one entry per dim of {a.name}",
        ValueError,
    )
    shape = []
    for size, start, end, step in zip(a.shape, starts, ends, steps):
        check(isinstance(step, int) and step >= 1, lambda step=step: f"prims.slice: step {step} must be >= 1")
        check(
            bool(start >= 0) and bool(start <= end) and bool(end <= size),
            lambda start=start, end=end, size=size: (
                f"prims.slice: needs 0 <= start <= end <= size, got start={start}, end={end}, size={size}"
            ),
            IndexError,
        )
        length = end - start
        shape.append(length if step == 1 else (length + step - 1) // step)
    return TensorProxy(shape, a.dtype, a.device)


def _squeeze_meta(a: TensorProxy, dims: Any) -> TensorProxy:
    _check_dims("squeeze", a, dims)
    for d in dims:
        check(same_size(a.shape[d], 1), lambda d=d: f"prims.squeeze: dim {d} of {a.name} is not of size 1")
    return TensorProxy([s for i, s in enumerate(a.shape) if i not in dims], a.dtype, a.device)


def _cat_meta(tensors: Any, dim: int) -> TensorProxy:
    first = tensors[0]
    for t in tensors[1:]:
        check(
            t.dtype == first.dtype and t.ndim == first.ndim,
            lambda t=t: f"prims.cat: {t.name} differs from {first.name} in dtype or rank",
            TypeError,
        )
        for i in range(first.ndim):
            if i != dim:
                check(
                    same_size(t.shape[i], first.shape[i]),
                    lambda t=t, i=i: f"prims.cat: dim {i} of {t.name} does not match {first.name}",
                    ValueError,
                )
    shape = list(first.shape)
    shape[dim] = _product_sum([t.shape[dim] for t in tensors])
    return TensorProxy(shape, first.dtype, first.device)


def _product_sum(sizes: list) -> Any:
    total = sizes[0]
    for s in sizes[1:]:
        total = total + s
    return total


def _index_select_meta(a: TensorProxy, dim: int, index: TensorProxy) -> TensorProxy:
    check(
        index.ndim <= 1 and dtypes.is_integer(index.dtype),
        lambda: f"prims.index_select: index {index.name} must be a 1-D integer tensor",
        TypeError,
    )
    shape = list(a.shape)
    if shape:
        shape[dim] = index.shape[0] if index.ndim else 1
    return TensorProxy(shape, a.dtype, a.device)


def _index_update_meta(prim: Prim) -> Callable:
    def meta(a: TensorProxy, dim: int, index: TensorProxy, source: TensorProxy) -> TensorProxy:
        check(
            source.dtype == a.dtype and source.ndim == a.ndim,
            lambda: (
                f"prims.{prim.value}: {source.name} ({source.dtype}, rank {source.ndim}) must match {a.name} "
                f"({a.dtype}, rank {a.ndim})"
            ),
            TypeError,
        )
        check(
            index.ndim <= 1 and dtypes.is_integer(index.dtype),
            lambda: f"prims.{prim.value}: index {index.name} must be a 1-D integer tensor",
            TypeError,
        )
        return TensorProxy(a.shape, a.dtype, a.device)

    return meta


def _slice_update_meta(a: TensorProxy, value: TensorProxy, starts: Any, ends: Any, steps: Any) -> TensorProxy:
    region = _slice_meta(a, starts, ends, steps)
    _check_same_shape(Prim.SLICE_UPDATE, [region, value])
    return TensorProxy(a.shape, a.dtype, a.device)


def _take_along_dim_meta(a: TensorProxy, index: TensorProxy, dim: int) -> TensorProxy:
    check(
        index.ndim == a.ndim,
        lambda: f"prims.take_along_dim: {index.name} must have {a.name}'s rank",
        ValueError,
    )
    return TensorProxy(index.shape, a.dtype, a.device)


def _matmul_meta(a: TensorProxy, b: TensorProxy) -> TensorProxy:
    check(
        a.ndim >= 2 and a.ndim == b.ndim,
        lambda: f"prims.matmul: {a.name} and {b.name} need the same rank >= 2",
        ValueError,
    )
    check(
        a.dtype == b.dtype,
        lambda: f"prims.matmul: {a.name} is {a.dtype} but {b.name} is {b.dtype}",
        TypeError,
    )
    for i in range(a.ndim - 2):
        check(
            same_size(a.shape[i], b.shape[i]),
            lambda: f"prims.matmul: batch dims of {a.name} and {b.name} differ",
            ValueError,
        )
    check(
        same_size(a.shape[-1], b.shape[-2]),
        lambda: f"prims.matmul: {a.name} {a.shape} @ {b.name} {b.shape}: inner sizes differ",
        ValueError,
    )
    return TensorProxy((*a.shape[:-1], b.shape[-1]), a.dtype, a.device)


def _linear_meta(a: TensorProxy, w: TensorProxy, bias: TensorProxy | None) -> TensorProxy:
    check(
        w.ndim == 2 and same_size(a.shape[-1], w.shape[1]),
        lambda: f"prims.linear: {a.name} {a.shape} does not match weight {w.name} {w.shape}",
        ValueError,
    )
    check(
        a.dtype == w.dtype and (bias is None or bias.dtype == a.dtype),
        lambda: "prims.linear: operands must share a dtype",
        TypeError,
    )
    return TensorProxy((*a.shape[:-1], w.shape[0]), a.dtype, a.device)


def _sdpa_meta(
    q: TensorProxy, k: TensorProxy, v: TensorProxy, attn_mask: Any, is_causal: bool, scale: Any
) -> TensorProxy:
    check(
        q.ndim >= 2 and k.ndim == q.ndim and v.ndim == q.ndim,
        lambda: "prims.sdpa: q, k, v must share a rank >= 2",
        ValueError,
    )
    check(q.dtype == k.dtype == v.dtype, lambda: "prims.sdpa: q, k, v must share a dtype", TypeError)
    return TensorProxy((*q.shape[:-1], v.shape[-1]), q.dtype, q.device)


def _full_meta(shape: Any, value: Any, dtype: torch.dtype, device: torch.device) -> TensorProxy:
    return TensorProxy(shape, dtype, device)


def _empty_meta(shape: Any, dtype: torch.dtype, device: torch.device) -> TensorProxy:
    return TensorProxy(shape, dtype, device)


def _iota_meta(length: Any, start: Any, step: Any, dtype: torch.dtype, device: torch.device) -> TensorProxy:
    return TensorProxy((length,), dtype, device)


def _guard_meta(*args: Any) -> None:
    return None


def _copy_to_meta(computed: TensorProxy, buffer: TensorProxy) -> None:
    _check_same_shape(Prim.COPY_TO, [buffer, computed])
    return None


def _copy__meta(target: TensorProxy, value: TensorProxy) -> None:
    _check_same_shape(Prim.COPY_, [target, value])
    return None


META: dict[Prim, Callable | None] = {
    **{p: _elementwise_meta(p) for p in UNARY | BINARY},
    Prim.WHERE: _where_meta,
    Prim.CONVERT_ELEMENT_TYPE: _convert_meta,
    **{p: _reduction_meta(p) for p in REDUCTIONS - {Prim.ARGMAX}},
    Prim.ARGMAX: _argmax_meta,
    Prim.BROADCAST_IN_DIM: _broadcast_in_dim_meta,
    Prim.RESHAPE: _reshape_meta,
    Prim.PERMUTE: _permute_meta,
    Prim.SLICE: _slice_meta,
    Prim.SQUEEZE: _squeeze_meta,
    Prim.CAT: _cat_meta,
    Prim.INDEX_SELECT: _index_select_meta,
    Prim.INDEX_COPY: _index_update_meta(Prim.INDEX_COPY),
    Prim.INDEX_ADD: _index_update_meta(Prim.INDEX_ADD),
    Prim.SLICE_UPDATE: _slice_update_meta,
    Prim.TAKE_ALONG_DIM: _take_along_dim_meta,
    Prim.MATMUL: _matmul_meta,
    Prim.LINEAR: _linear_meta,
    Prim.SDPA: _sdpa_meta,
    Prim.FULL: _full_meta,
    Prim.EMPTY: _empty_meta,
    Prim.IOTA: _iota_meta,
    Prim.COPY_TO: _copy_to_meta,
    Prim.COPY_: _copy__meta,
    Prim.CHECK_TENSOR: _guard_meta,
    Prim.CHECK_TYPE: _guard_meta,
    Prim.CHECK_VALUE: _guard_meta,
    Prim.CHECK_STRIDES: _guard_meta,
    Prim.CHECK_ALIASING: _guard_meta,
    # Built by the frontend, which knows the element proxies; there is nothing to infer.
    Prim.UNPACK_SEQUENCE: None,
    Prim.UNPACK_DICT: None,
}

# ---------------------------------------------------------------------------------------------
# Calling prims


def bind(prim: Prim, *args: Any) -> Any:
    """Applies `prim`: records it while tracing on proxies, else computes the value right away."""
    context = ir.current()
    if context is None or (prim not in FACTORIES and not _has_proxy(args)):
        return evaluate(prim, args)
    meta = META[prim]
    check(meta is not None, lambda: f"prims.{prim.value} is built by the frontend, not called", TypeError)
    if prim is Prim.RESHAPE:
        from compiler.aliasing import reshape_operand

        # NOTE: eager reshape copies when strides forbid a view; the IR's reshape always views.
        args = (reshape_operand(args[0], args[1]), *args[1:])
    output = meta(*args)
    context.record(BoundSymbol(prim, args, {}, output))
    return output


def _has_proxy(args: tuple) -> bool:
    return next(ir.proxies_in(args), None) is not None


def evaluate(prim: Prim, args: tuple) -> Any:
    """The value of `prim` on concrete arguments (numbers in Python, tensors through torch)."""
    if prim in NUMBER_IMPLS and not builtins.any(isinstance(a, torch.Tensor) for a in args):
        return NUMBER_IMPLS[prim](*args)
    from compiler.executors.torch import IMPLS

    return IMPLS[prim](*args)


_BY_NAME = {p.value: p for p in Prim}
_CALLABLES: dict[str, Callable] = {}


def __getattr__(name: str) -> Callable:
    """`prims.add` etc.: a callable that binds the prim of that name."""
    fn = _CALLABLES.get(name)
    if fn is None:
        prim = _BY_NAME.get(name)
        if prim is None:
            raise AttributeError(f"module 'compiler.prims' has no prim named '{name}'")
        fn = _CALLABLES[name] = lambda *args: bind(prim, *args)
        fn.__name__ = name
    return fn
