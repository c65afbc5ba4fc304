"""Meta functions: each prim's output proxies (shape, dtype, device) inferred from its arguments.

They also validate: prims do not broadcast or promote, so mismatched shapes or dtypes raise with
the proxies named. Comparing symbolic sizes records guards (via `same_size`). Every prim has an
entry in `prims.META` (None for the unpacking prims the frontend builds itself).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

import torch

from compiler.core import dtypes
from compiler.core.errors import check
from compiler.core.ir import NumberProxy, TensorProxy, same_size, size_product
from compiler.prims.meta_checks import check_same_shape
from compiler.prims.meta_library import LIBRARY_META
from compiler.prims.meta_linalg import LINALG_META
from compiler.prims.prim import (
    BINARY,
    COMPARISONS,
    DISTRIBUTIONS,
    NUMBER_IMPLS,
    REDUCTIONS,
    SCATTER_REDUCTIONS,
    UNARY,
    Prim,
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
        check_same_shape(prim, tensors)
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
    check_same_shape(Prim.WHERE, tensors, same_dtype=False)
    check_same_shape(Prim.WHERE, data)
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


def _cumsum_meta(a: TensorProxy, dim: int, reverse: bool) -> TensorProxy:
    check(
        isinstance(dim, int) and 0 <= dim < a.ndim and isinstance(reverse, bool),
        lambda: f"prims.cumsum: dim {dim!r} must be a dim of {a.name} (rank {a.ndim}), reverse a bool",
        ValueError,
    )
    return TensorProxy(a.shape, a.dtype, a.device)


def _cumprod_meta(a: TensorProxy, dim: int) -> TensorProxy:
    check(
        isinstance(dim, int) and 0 <= dim < a.ndim,
        lambda: f"prims.cumprod: dim {dim!r} must be a dim of {a.name} (rank {a.ndim})",
        ValueError,
    )
    return TensorProxy(a.shape, a.dtype, a.device)


def _argsort_meta(a: TensorProxy, dim: int, descending: bool, stable: bool) -> TensorProxy:
    check(
        isinstance(dim, int) and 0 <= dim < a.ndim and isinstance(descending, bool) and isinstance(stable, bool),
        lambda: f"prims.argsort: dim {dim!r} must be a dim of {a.name} (rank {a.ndim}), descending and stable bools",
        ValueError,
    )
    return TensorProxy(a.shape, torch.int64, a.device)


def _topk_meta(a: TensorProxy, k: Any, dim: int, largest: bool, sorted: bool) -> TensorProxy:
    check(
        isinstance(dim, int) and 0 <= dim < a.ndim and isinstance(largest, bool) and isinstance(sorted, bool),
        lambda: f"prims.topk: dim {dim!r} must be a dim of {a.name} (rank {a.ndim}), largest and sorted bools",
        ValueError,
    )
    shape = list(a.shape)
    shape[dim] = k
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


def _reshape_meta(a: TensorProxy, shape: Any) -> TensorProxy:
    check(
        same_size(size_product(a.shape), size_product(shape)),
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
    check_same_shape(Prim.SLICE_UPDATE, [region, value])
    return TensorProxy(a.shape, a.dtype, a.device)


def _take_along_dim_meta(a: TensorProxy, index: TensorProxy, dim: int) -> TensorProxy:
    check(
        index.ndim == a.ndim,
        lambda: f"prims.take_along_dim: {index.name} must have {a.name}'s rank",
        ValueError,
    )
    return TensorProxy(index.shape, a.dtype, a.device)


def _scatter_meta(prim: Prim) -> Callable:
    def meta(a: TensorProxy, dim: int, index: TensorProxy, src: TensorProxy, *mode: Any) -> TensorProxy:
        check(
            isinstance(dim, int) and 0 <= dim < a.ndim and index.ndim == src.ndim == a.ndim,
            lambda: (
                f"prims.{prim.value}: dim {dim!r} must be a dim of {a.name} (rank {a.ndim}), and {index.name} and "
                f"{src.name} of its rank (got {index.ndim}, {src.ndim})"
            ),
            ValueError,
        )
        check(
            index.dtype == torch.int64 and src.dtype == a.dtype,
            lambda: (
                f"prims.{prim.value}: {index.name} must be int64 (got {index.dtype}) and {src.name} {a.name}'s "
                f"{a.dtype} (got {src.dtype})"
            ),
            TypeError,
        )
        check_same_shape(prim, [index, src], same_dtype=False)
        check(
            src.device == a.device,
            lambda: f"prims.{prim.value}: {a.name} is on {a.device} but {src.name} is on {src.device}",
            ValueError,
        )
        for d in range(a.ndim):
            check(
                d == dim or builtins.bool(index.shape[d] <= a.shape[d]),
                lambda d=d: f"prims.{prim.value}: {index.name} {index.shape} exceeds {a.name} {a.shape} in dim {d}",
                ValueError,
            )
        if prim is Prim.SCATTER_REDUCE:
            check(
                len(mode) == 2 and mode[0] in SCATTER_REDUCTIONS and isinstance(mode[1], bool),
                lambda: f"prims.scatter_reduce: reduce must be one of {SCATTER_REDUCTIONS} and include_self a bool",
                ValueError,
            )
        return TensorProxy(a.shape, a.dtype, a.device)

    return meta


def _marker_meta(prim: Prim) -> Callable[[TensorProxy, TensorProxy], TensorProxy]:
    """The meta of a marker `prim(value, old)`: a tensor's new contents `value` and its old ones."""

    def meta(value: TensorProxy, old: TensorProxy) -> TensorProxy:
        check(
            isinstance(value, TensorProxy) and isinstance(old, TensorProxy) and value.dtype == old.dtype,
            lambda: f"prims.{prim.value}: expected two tensors of one dtype, got {value!r} and {old!r}",
            TypeError,
        )
        check_same_shape(prim, [value, old])
        return TensorProxy(value.shape, value.dtype, value.device)

    return meta


def _stop_gradient_meta(a: TensorProxy) -> TensorProxy:
    check(
        isinstance(a, TensorProxy),
        lambda: f"prims.stop_gradient: expected a tensor, got {type(a).__name__} {a!r}",
        TypeError,
    )
    return TensorProxy(a.shape, a.dtype, a.device)


def _device_put_meta(a: TensorProxy, device: torch.device) -> TensorProxy:
    check(
        isinstance(a, TensorProxy) and isinstance(device, torch.device),
        lambda: f"prims.device_put: expected a tensor and a torch.device, got {a!r} and {device!r}",
        TypeError,
    )
    return TensorProxy(a.shape, a.dtype, device)


def _full_meta(shape: Any, value: Any, dtype: torch.dtype, device: torch.device) -> TensorProxy:
    return TensorProxy(shape, dtype, device)


def _empty_meta(shape: Any, dtype: torch.dtype, device: torch.device) -> TensorProxy:
    return TensorProxy(shape, dtype, device)


def _iota_meta(length: Any, start: Any, step: Any, dtype: torch.dtype, device: torch.device) -> TensorProxy:
    return TensorProxy((length,), dtype, device)


def _dropout_noise_meta(shape: Any, p: float, dtype: torch.dtype, device: torch.device) -> TensorProxy:
    return TensorProxy(shape, dtype, device)


def _random_values_meta(shape: Any, distribution: str, dtype: torch.dtype, device: torch.device) -> TensorProxy:
    check(
        distribution in DISTRIBUTIONS and dtypes.is_float(dtype),
        lambda: (
            f"prims.random_values: distribution must be one of {DISTRIBUTIONS} and dtype a floating dtype, "
            f"got {distribution!r} and {dtype}"
        ),
        ValueError,
    )
    return TensorProxy(shape, dtype, device)


def _guard_meta(*args: Any) -> None:
    return None


def _copy_to_meta(computed: TensorProxy, buffer: TensorProxy) -> None:
    check_same_shape(Prim.COPY_TO, [buffer, computed])
    return None


def _copy__meta(target: TensorProxy, value: TensorProxy, without_grad: bool = False) -> None:
    check_same_shape(Prim.COPY_, [target, value])
    return None


# The meta table: prim -> function inferring the output proxies (shape, dtype, device) from the
# arguments; `None` marks prims the frontend builds itself.
META: dict[Prim, Callable | None] = {
    **LINALG_META,
    **LIBRARY_META,
    **{p: _elementwise_meta(p) for p in UNARY | BINARY},
    Prim.WHERE: _where_meta,
    Prim.CONVERT_ELEMENT_TYPE: _convert_meta,
    **{p: _reduction_meta(p) for p in REDUCTIONS - {Prim.ARGMAX}},
    Prim.ARGMAX: _argmax_meta,
    Prim.CUMSUM: _cumsum_meta,
    Prim.CUMPROD: _cumprod_meta,
    Prim.ARGSORT: _argsort_meta,
    Prim.TOPK: _topk_meta,
    Prim.BROADCAST_IN_DIM: _broadcast_in_dim_meta,
    Prim.RESHAPE: _reshape_meta,
    Prim.PERMUTE: _permute_meta,
    Prim.SLICE: _slice_meta,
    Prim.SQUEEZE: _squeeze_meta,
    Prim.CAT: _cat_meta,
    Prim.STOP_GRADIENT: _stop_gradient_meta,
    Prim.UPDATED_WITHOUT_GRAD: _marker_meta(Prim.UPDATED_WITHOUT_GRAD),
    Prim.OVERWRITTEN: _marker_meta(Prim.OVERWRITTEN),
    Prim.DEVICE_PUT: _device_put_meta,
    Prim.INDEX_SELECT: _index_select_meta,
    Prim.INDEX_COPY: _index_update_meta(Prim.INDEX_COPY),
    Prim.INDEX_ADD: _index_update_meta(Prim.INDEX_ADD),
    Prim.SLICE_UPDATE: _slice_update_meta,
    Prim.TAKE_ALONG_DIM: _take_along_dim_meta,
    Prim.SCATTER: _scatter_meta(Prim.SCATTER),
    Prim.SCATTER_REDUCE: _scatter_meta(Prim.SCATTER_REDUCE),
    Prim.FULL: _full_meta,
    Prim.EMPTY: _empty_meta,
    Prim.IOTA: _iota_meta,
    Prim.DROPOUT_NOISE: _dropout_noise_meta,
    Prim.RANDOM_VALUES: _random_values_meta,
    Prim.COPY_TO: _copy_to_meta,
    Prim.COPY_: _copy__meta,
    Prim.CHECK_TENSOR: _guard_meta,
    Prim.CHECK_TYPE: _guard_meta,
    Prim.CHECK_VALUE: _guard_meta,
    Prim.CHECK_STRIDES: _guard_meta,
    Prim.CHECK_ALIASING: _guard_meta,
    Prim.CHECK_REQUIRES_GRAD: _guard_meta,
    Prim.CHECK_AUTOCAST: _guard_meta,
    # Built by the frontend, which knows the element proxies; there is nothing to infer.
    Prim.UNPACK_SEQUENCE: None,
    Prim.UNPACK_DICT: None,
    Prim.SIZE: None,
}
