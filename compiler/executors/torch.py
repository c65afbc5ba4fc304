"""The torch executor: the reference implementation of every prim, on any device.

`IMPLS` maps each `Prim` to a callable taking the prim's positional arguments with real tensors
and numbers in place of proxies. Number-only applications use `prims.NUMBER_IMPLS` instead.
Guards raise `GuardFailure` when the arguments do not match what the trace assumed.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from compiler import prims
from compiler.core.errors import GuardFailure
from compiler.core.executor import Executor
from compiler.core.memory import overlapping
from compiler.executors.attention import attention, attention_backward, attention_forward
from compiler.executors.convolution import convolution, convolution_backward, convolution_transpose
from compiler.ops import autocast
from compiler.prims import NUMBER_IMPLS, Prim


def _convert(a: Any, dtype: Any) -> Any:
    if isinstance(a, torch.Tensor):
        return a.to(dtype)
    return dtype(a)


def _maximum(a: Any, b: Any) -> Any:
    if not isinstance(b, torch.Tensor):
        return torch.clamp(a, min=b) if b == b else torch.full_like(a, b)
    if not isinstance(a, torch.Tensor):
        return _maximum(b, a)
    return torch.maximum(a, b)


def _minimum(a: Any, b: Any) -> Any:
    if not isinstance(b, torch.Tensor):
        return torch.clamp(a, max=b) if b == b else torch.full_like(a, b)
    if not isinstance(a, torch.Tensor):
        return _minimum(b, a)
    return torch.minimum(a, b)


def _tensor_like(x: Any, like: torch.Tensor) -> torch.Tensor:
    """`x`, or the number `x` as a 0-d tensor of `like`'s dtype and device (for torch functions
    that take no number in that place)."""
    return x if isinstance(x, torch.Tensor) else torch.tensor(x, dtype=like.dtype, device=like.device)


def _fmod(a: Any, b: Any) -> Any:
    return torch.fmod(_tensor_like(a, b), b)


def _atan2(a: Any, b: Any) -> Any:
    # NOTE: torch.atan2 takes tensors only; a number operand is a scalar of the tensor's dtype.
    return torch.atan2(_tensor_like(a, b), _tensor_like(b, a))


def _reduce(fn: Callable) -> Callable:
    def reduce(a: torch.Tensor, dims: Sequence[int]) -> torch.Tensor:
        return fn(a, tuple(dims)) if dims else a.clone()

    return reduce


def _sum(a: torch.Tensor, dims: Sequence[int]) -> torch.Tensor:
    # NOTE: in a's dtype, as the prim's meta says: torch sums integers into int64 by default
    return torch.sum(a, tuple(dims), dtype=a.dtype) if dims else a.clone()


def _prod(a: torch.Tensor, dims: Sequence[int]) -> torch.Tensor:
    if not dims:
        return a.clone()
    for d in sorted(dims, reverse=True):
        a = torch.prod(a, d, dtype=a.dtype)
    return a


def _broadcast_in_dim(a: torch.Tensor, shape: Sequence[int], broadcast_dims: Sequence[int]) -> torch.Tensor:
    view_shape = [1] * len(shape)
    for i, d in enumerate(broadcast_dims):
        view_shape[d] = a.shape[i]
    return a.reshape(view_shape).expand(list(shape))


def _broadcast_in_dim_source(bsym: Any, g: Any) -> list[str] | None:
    """`_broadcast_in_dim` as one `expand` where the operand's dims are the result's last ones (a
    0-d value, a vector over rows: torch's own broadcasting), as `expanded_inputs` makes them before
    a region; None, keeping the call, otherwise."""
    a, shape, dims = bsym.args
    if list(dims) != list(range(len(shape) - len(a.shape), len(shape))):
        return None
    sizes = "".join(f"{g.source(s)}, " for s in shape)
    return [f"{bsym.output.name} = {a.name}.expand(({sizes}))"]


_broadcast_in_dim.inline_source = _broadcast_in_dim_source  # type: ignore[attr-defined]


def _slice(a: torch.Tensor, starts: Sequence, ends: Sequence, steps: Sequence) -> torch.Tensor:
    return a[tuple(slice(s, e, st) for s, e, st in zip(starts, ends, steps))]


def _slice_source(bsym: Any, g: Any) -> list[str] | None:
    """`_slice` as one line of narrows, one per dim the slice changes (its bounds are known when
    the trace is compiled); None, keeping the call, for strided slices and whole-tensor ones."""
    a, starts, ends, steps = bsym.args
    expr = a.name
    for dim, (size, start, end, step) in enumerate(zip(a.shape, starts, ends, steps)):
        if step != 1:
            return None
        if _is_int(start, 0) and (end is size or (isinstance(size, int) and _is_int(end, size))):
            continue
        static = isinstance(start, int) and isinstance(end, int)
        length = str(end - start) if static else f"{g.source(end)} - {g.source(start)}"
        expr += f".narrow({dim}, {g.source(start)}, {length})"
    return None if expr == a.name else [f"{bsym.output.name} = {expr}"]


def _is_int(value: Any, expected: int) -> bool:
    return isinstance(value, int) and value == expected


_slice.inline_source = _slice_source  # type: ignore[attr-defined]


def _argmax(a: torch.Tensor, dim: int | None) -> torch.Tensor:
    return torch.argmax(a, dim)


# NOTE: dtype=a.dtype: the scan prims keep their operand's dtype, where torch's own ops sum small
# integers (int32, bool) in int64
def _cumsum(a: torch.Tensor, dim: int, reverse: bool) -> torch.Tensor:
    if reverse:
        return torch.cumsum(a.flip(dim), dim, dtype=a.dtype).flip(dim)
    return torch.cumsum(a, dim, dtype=a.dtype)


def _cumprod(a: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.cumprod(a, dim, dtype=a.dtype)


def _argsort(a: torch.Tensor, dim: int, descending: bool, stable: bool) -> torch.Tensor:
    return torch.sort(a, dim=dim, descending=descending, stable=stable).indices


def _topk(a: torch.Tensor, k: int, dim: int, largest: bool, sorted: bool) -> torch.Tensor:
    return torch.topk(a, k, dim=dim, largest=largest, sorted=sorted).indices


def check_requires_grad(tensors: tuple, flags: tuple) -> None:
    """Guard: under grad mode, exactly the tensors flagged require grad; outside it, none was flagged."""
    if torch.is_grad_enabled():
        if tuple(t.requires_grad for t in tensors) != flags:
            raise GuardFailure
    elif True in flags:
        raise GuardFailure


def check_autocast(expected: tuple) -> None:
    """Guard: autocast is in the state the trace was made under (`ops/autocast.state()`)."""
    if autocast.state() != expected:
        raise GuardFailure


def _iota(length: int, start: Any, step: Any, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    if length == 0:
        # NOTE: the float end bound below would fall behind start, which torch.arange rejects.
        return torch.empty(0, dtype=dtype, device=device)
    if dtype.is_floating_point:
        return torch.arange(start, start + step * (length - 0.5), step, dtype=dtype, device=device)
    return torch.arange(start, start + step * length, step, dtype=dtype, device=device)


def dropout_noise(shape: Sequence[int], p: float, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """0 with probability p, else 1 / (1 - p), drawn as eager F.dropout draws them (same generator
    calls), so a seeded program drops the same elements compiled as eager."""
    ones = torch.ones(shape, dtype=dtype, device=device)
    if device.type == "cpu":
        # NOTE: eager CPU dropout is bernoulli_(1 - p) then div_(1 - p) on a tensor like the input.
        return torch.empty_like(ones).bernoulli_(1 - p).div_(1 - p)
    # NOTE: on accelerators eager dropout runs native_dropout's kernel (its own random stream).
    return torch.native_dropout(ones, p, True)[0]


def random_values(shape: Sequence[int], distribution: str, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """torch.randn / torch.rand / Tensor.exponential_ values: the same generator calls as eager makes,
    so a seeded program draws the same numbers compiled as eager."""
    if distribution == "exponential":
        return torch.empty(shape, dtype=dtype, device=device).exponential_()
    draw = torch.randn if distribution == "normal" else torch.rand
    return draw(shape, dtype=dtype, device=device)


def copy_to(computed: torch.Tensor, buffer: torch.Tensor) -> None:
    """Write-back: stores `computed` into `buffer` (an input the caller observes)."""
    buffer.copy_(computed)


def copy_(target: torch.Tensor, value: torch.Tensor, without_grad: bool = False) -> None:
    """In-place (unfunctionalized traces only): overwrites `target`, and so every view of it
    (`without_grad`: where autograd does not record, as the program wrote it)."""
    if without_grad:
        with torch.no_grad():
            target.copy_(value)
    else:
        target.copy_(value)


def marked_value(value: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
    """`value`: what `updated_without_grad` and `overwritten` hold (markers for autodiff, dropped
    after it unless returned)."""
    return value


def slice_update(
    a: torch.Tensor, value: torch.Tensor, starts: Sequence, ends: Sequence, steps: Sequence
) -> torch.Tensor:
    """A copy of `a` whose region `a[starts:ends:steps]` holds `value`."""
    out = a.clone()
    out[tuple(slice(s, e, st) for s, e, st in zip(starts, ends, steps))] = value
    return out


def check_strides(t: torch.Tensor, strides: tuple) -> None:
    """Guard: `t` has exactly these strides (the trace relied on its memory layout)."""
    if t.stride() != strides:
        raise GuardFailure


_storage_data_ptr = torch.UntypedStorage.data_ptr


def check_aliasing(tensors: tuple, groups: tuple | None, disjoint: bool) -> None:
    """Guard on how tensor arguments share memory.

    `groups[i] != i` means the trace took `tensors[i]` to be the very same view of memory as
    `tensors[groups[i]]` (the same tensor passed twice): it must still be (`groups` is None when
    the trace merged no arguments). With `disjoint` (the trace writes into an argument), tensors
    of different groups must not overlap in memory.
    """
    if groups is None:
        if not disjoint:
            return
        # NOTE: maps of method descriptors run in C: no Python frame per tensor (hundreds in an optimizer step)
        if len(set(map(_storage_data_ptr, map(torch.Tensor.untyped_storage, tensors)))) == len(tensors):
            return  # the common case: every argument has its own storage
        groups = tuple(range(len(tensors)))
    by_storage: dict[int, list[torch.Tensor]] = {}
    for i, (t, g) in enumerate(zip(tensors, groups)):
        if g != i:
            u = tensors[g]
            if t is not u and (t.data_ptr() != u.data_ptr() or t.stride() != u.stride()):
                raise GuardFailure
        elif disjoint and t.numel():
            by_storage.setdefault(t.untyped_storage().data_ptr(), []).append(t)
    if any(len(members) > 1 and overlapping(members) for members in by_storage.values()):
        raise GuardFailure


def shape_matches(actual: Sequence[int], shape: Sequence[int | None]) -> bool:
    """Whether sizes `actual` fit the guarded `shape`: equal where it holds a size, at least 2 where
    it holds None (a symbolic size; sizes 0 and 1 get entries of their own, as in torch.compile)."""
    if None not in shape:
        return tuple(actual) == tuple(shape)
    return len(actual) == len(shape) and all(a >= 2 if s is None else a == s for a, s in zip(actual, shape))


def check_tensor(t: Any, shape: tuple, dtype: torch.dtype, device: torch.device) -> None:
    """Guard: `t` is a tensor of this shape (see `shape_matches`), dtype and device."""
    if not (isinstance(t, torch.Tensor) and t.dtype is dtype and shape_matches(t.shape, shape) and t.device == device):
        raise GuardFailure


def size(t: torch.Tensor, dim: int) -> int:
    """Prologue: the size of tensor argument `t` along `dim` (a symbolic size of the computation)."""
    return t.shape[dim]


def check_type(x: Any, expected: type) -> None:
    """Guard: `type(x) is expected`."""
    if type(x) is not expected:
        raise GuardFailure


def check_value(x: Any, expected: Any) -> None:
    """Guard: `x` has the type and value the trace baked in."""
    if type(x) is not type(expected) or x != expected:
        raise GuardFailure


def unpack_sequence(seq: Any, length: int) -> Any:
    """Prologue: `seq` itself after checking its length (the caller unpacks it)."""
    if len(seq) != length:
        raise GuardFailure
    return seq


def unpack_dict(d: Any, keys: tuple) -> Any:
    """Prologue: the values of `d` in the order of `keys`, after checking it has exactly those keys."""
    if len(d) != len(keys):
        raise GuardFailure
    try:
        return [d[k] for k in keys]
    except KeyError:
        raise GuardFailure from None


IMPLS: dict[Prim, Callable] = {
    Prim.NEG: operator.neg,
    Prim.ABS: torch.abs,
    Prim.EXP: torch.exp,
    Prim.EXP2: torch.exp2,
    Prim.LOG: torch.log,
    Prim.LOG1P: torch.log1p,
    Prim.LOG2: torch.log2,
    Prim.LOG10: torch.log10,
    Prim.SQRT: torch.sqrt,
    Prim.RSQRT: torch.rsqrt,
    Prim.SIN: torch.sin,
    Prim.COS: torch.cos,
    Prim.TAN: torch.tan,
    Prim.SINH: torch.sinh,
    Prim.COSH: torch.cosh,
    Prim.TANH: torch.tanh,
    Prim.ASINH: torch.asinh,
    Prim.ACOSH: torch.acosh,
    Prim.ATANH: torch.atanh,
    Prim.ERF: torch.erf,
    Prim.ERFC: torch.erfc,
    Prim.ERFINV: torch.erfinv,
    Prim.RECIPROCAL: torch.reciprocal,
    Prim.FLOOR: torch.floor,
    Prim.CEIL: torch.ceil,
    Prim.TRUNC: torch.trunc,
    Prim.SIGN: torch.sign,
    Prim.BITWISE_NOT: torch.bitwise_not,
    Prim.ADD: operator.add,
    Prim.SUB: operator.sub,
    Prim.MUL: operator.mul,
    Prim.DIV: operator.truediv,
    Prim.FLOOR_DIVIDE: operator.floordiv,
    Prim.REMAINDER: operator.mod,
    Prim.FMOD: _fmod,
    Prim.POW: operator.pow,
    Prim.ATAN2: _atan2,
    Prim.MAXIMUM: _maximum,
    Prim.MINIMUM: _minimum,
    Prim.EQ: operator.eq,
    Prim.NE: operator.ne,
    Prim.LT: operator.lt,
    Prim.LE: operator.le,
    Prim.GT: operator.gt,
    Prim.GE: operator.ge,
    Prim.BITWISE_AND: operator.and_,
    Prim.BITWISE_OR: operator.or_,
    Prim.BITWISE_XOR: operator.xor,
    Prim.WHERE: torch.where,
    Prim.CONVERT_ELEMENT_TYPE: _convert,
    Prim.SUM: _sum,
    Prim.PROD: _prod,
    Prim.AMAX: _reduce(torch.amax),
    Prim.AMIN: _reduce(torch.amin),
    Prim.ARGMAX: _argmax,
    Prim.CUMSUM: _cumsum,
    Prim.CUMPROD: _cumprod,
    Prim.ARGSORT: _argsort,
    Prim.TOPK: _topk,
    Prim.BROADCAST_IN_DIM: _broadcast_in_dim,
    Prim.RESHAPE: torch.reshape,
    Prim.PERMUTE: torch.permute,
    Prim.SLICE: _slice,
    Prim.SQUEEZE: torch.squeeze,
    Prim.CAT: torch.cat,
    Prim.STOP_GRADIENT: torch.Tensor.detach,
    Prim.UPDATED_WITHOUT_GRAD: marked_value,
    Prim.OVERWRITTEN: marked_value,
    Prim.INDEX_SELECT: torch.index_select,
    Prim.INDEX_COPY: torch.index_copy,
    Prim.INDEX_ADD: torch.index_add,
    Prim.SLICE_UPDATE: slice_update,
    Prim.TAKE_ALONG_DIM: lambda a, index, dim: torch.gather(a, dim, index),
    Prim.SCATTER: torch.scatter,
    Prim.SCATTER_REDUCE: lambda a, dim, index, src, reduce, include_self: torch.scatter_reduce(
        a, dim, index, src, reduce, include_self=include_self
    ),
    Prim.MATMUL: torch.matmul,
    Prim.LINEAR: F.linear,
    Prim.GROUPED_MM: lambda a, b, offs: torch._grouped_mm(a, b, offs=offs),
    Prim.SDPA: attention,
    Prim.SDPA_FORWARD: attention_forward,
    Prim.SDPA_BACKWARD: attention_backward,
    Prim.CONVOLUTION: convolution,
    Prim.CONVOLUTION_BACKWARD: convolution_backward,
    Prim.CONVOLUTION_TRANSPOSE: convolution_transpose,
    Prim.DEVICE_PUT: torch.Tensor.to,
    Prim.FULL: lambda shape, value, dtype, device: torch.full(shape, value, dtype=dtype, device=device),
    Prim.EMPTY: lambda shape, dtype, device: torch.empty(shape, dtype=dtype, device=device),
    Prim.IOTA: _iota,
    Prim.DROPOUT_NOISE: dropout_noise,
    Prim.RANDOM_VALUES: random_values,
    Prim.COPY_TO: copy_to,
    Prim.COPY_: copy_,
    Prim.UNPACK_SEQUENCE: unpack_sequence,
    Prim.UNPACK_DICT: unpack_dict,
    Prim.SIZE: size,
    Prim.CHECK_TENSOR: check_tensor,
    Prim.CHECK_TYPE: check_type,
    Prim.CHECK_VALUE: check_value,
    Prim.CHECK_STRIDES: check_strides,
    Prim.CHECK_ALIASING: check_aliasing,
    Prim.CHECK_REQUIRES_GRAD: check_requires_grad,
    Prim.CHECK_AUTOCAST: check_autocast,
}


prims.IMPLS.update(IMPLS)


def implementation(prim: Prim, numbers_only: bool) -> Callable:
    """The callable running `prim`; `numbers_only` picks the Python-number semantics."""
    if numbers_only and prim in NUMBER_IMPLS:
        return NUMBER_IMPLS[prim]
    return IMPLS[prim]


class TorchExecutor(Executor):
    """Runs any prim with torch (numbers with plain Python); the fallback for every other executor."""

    name = "torch"

    def implementation(self, bsym: Any) -> Callable | None:
        """The callable for a prim bound symbol (None for symbols that are not prims)."""
        if not isinstance(bsym.sym, Prim):
            return None
        from compiler.core.ir import NumberProxy

        return implementation(bsym.sym, isinstance(bsym.output, NumberProxy))
