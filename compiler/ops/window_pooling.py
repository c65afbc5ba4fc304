"""Pooling over sliding windows: `F.avg_pool1d/2d/3d` and `F.max_pool1d/2d/3d` (and their
`_with_indices` forms), with every argument eager takes: kernel, stride, padding, dilation (max),
ceil_mode, count_include_pad and divisor_override (avg).

A window is a product of one interval per pooled dim. The input is padded (with zeros for a sum,
the dtype's lowest value for a max) so that every window lies inside it, those ceil_mode adds
included; the elements at one offset of every window are then one strided slice of the padded
input. An average sums those slices one dim after the other (the sum over a box is a sum of sums
along each of its dims) and divides by eager's count of each window. A max scans them in eager's
order: a later element replaces the running max only where it is greater or NaN, or where the
running max is padding, so the gradient and the index go where eager's kernels send them.

A symbolic size stays symbolic: the output size is a formula of it, a window's count and first
position are computed over the whole output (an iota), and the input is padded past its end by
the most any size needs (a window reads its own elements only).
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from typing import Any

import torch

from compiler import prims
from compiler.core import dtypes
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy, size_product
from compiler.ops.aliasing import fresh_copy
from compiler.ops.elementwise import div
from compiler.ops.operands import to_dtype
from compiler.ops.padding import pad as pad_op
from compiler.ops.registry import register


@dataclass(frozen=True)
class _Dim:
    """The windows along one pooled dim: `out` windows of `kernel` elements `dilation` apart, the
    i-th starting at i * stride - padding. `size` and `out` are ints or symbolic sizes."""

    size: Any
    kernel: int
    stride: int
    padding: int
    dilation: int
    out: Any
    ceil_mode: bool

    @property
    def after(self) -> int:
        """How far past the input (and its padding) the last window reaches: padded there too. For
        a symbolic size, the most any size needs: ceil mode's last window starts at most
        stride - 1 past the padded input's last full window, and inside the input or its padding."""
        if not self.static():
            reach = self.padding + (self.stride - 1 if self.ceil_mode else 0)
            return min(reach, self.dilation * (self.kernel - 1))
        last = (self.out - 1) * self.stride + self.dilation * (self.kernel - 1) + 1
        return max(0, last - self.padding - self.size)

    def static(self) -> bool:
        """Whether the size (and so the output size) is an int."""
        return isinstance(self.size, int) and isinstance(self.out, int)

    def starts(self) -> list[int]:
        return [i * self.stride - self.padding for i in range(self.out)]

    def start_positions(self, device: Any) -> TensorProxy:
        """Each window's first position along the input (before the padding: negative)."""
        return prims.iota(self.out, -self.padding, self.stride, torch.int64, device)


def _ints(name: str, what: str, value: Any, pooled: int) -> list[int]:
    values = list(value) if isinstance(value, (tuple, list)) else [value] * pooled
    values = values * pooled if len(values) == 1 else values
    check(
        len(values) == pooled and all(isinstance(v, int) and not isinstance(v, bool) for v in values),
        lambda: f"{name}: {what} must be an int or {pooled} ints, got {value!r}{called_at()}",
        ValueError,
    )
    return values


def _geometry(
    name: str,
    input: Any,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    ceil_mode: bool,
    pooled: int,
    whole_kernel: bool = False,
) -> list[_Dim]:
    """Each pooled dim's windows, with eager's checks and output sizes (floor or ceil mode);
    `whole_kernel`: the input itself must be at least a kernel long (eager's avg_pool3d)."""
    check(
        isinstance(input, TensorProxy) and input.ndim in (pooled + 1, pooled + 2) and input.dtype != torch.bool,
        lambda: f"{name}: expected a {pooled + 1}-d or {pooled + 2}-d tensor of numbers{called_at()}",
        ValueError,
    )
    kernels = _ints(name, "kernel_size", kernel_size, pooled)
    strides = _ints(name, "stride", stride if stride not in (None, [], ()) else kernels, pooled)
    paddings = _ints(name, "padding", padding, pooled)
    dilations = _ints(name, "dilation", dilation, pooled)
    first = input.ndim - pooled
    dims = []
    for i, (k, s, p, d) in enumerate(zip(kernels, strides, paddings, dilations)):
        check(
            k > 0 and s > 0 and d > 0 and 0 <= p <= k // 2,
            lambda k=k, s=s, p=p, d=d: (
                f"{name}: kernel_size, stride and dilation must be positive and padding at most half of "
                f"kernel_size, got kernel_size={k}, stride={s}, padding={p}, dilation={d}{called_at()}"
            ),
            RuntimeError,
        )
        size = input.shape[first + i]
        check(
            not whole_kernel or bool(size >= k),
            lambda size=size, k=k, i=i: (
                f"{name}: the input's size {size} along dim {first + i} is smaller than kernel_size {k}{called_at()}"
            ),
            RuntimeError,
        )
        reach = size + 2 * p - d * (k - 1) - 1
        out = (reach + (s - 1 if ceil_mode else 0)) // s + 1
        if ceil_mode:  # NOTE: eager's rule: the last window must start inside the input or its left padding
            out = prims.minimum(out, (size + p - 1) // s + 1)
        check(
            bool(out >= 1),
            lambda size=size, k=k, i=i: (
                f"{name}: the input's size {size} along dim {first + i} is too small for a window of "
                f"{k} (the output size would be < 1){called_at()}"
            ),
            RuntimeError,
        )
        dims.append(_Dim(size, k, s, p, d, out, ceil_mode))
    return dims


def _padded(x: TensorProxy, axis: int, before: int, after: int, value: Any) -> TensorProxy:
    if before == 0 and after == 0:
        return x
    return pad_op(x, [0, 0] * (x.ndim - 1 - axis) + [before, after], value=value)


def _offset_slice(x: TensorProxy, axes: list[int], dims: list[_Dim], offsets: tuple[int, ...]) -> TensorProxy:
    """The element at `offsets` of every window (along `axes`) of the padded `x`."""
    starts, ends, steps = [0] * x.ndim, list(x.shape), [1] * x.ndim
    for axis, dim, offset in zip(axes, dims, offsets):
        starts[axis] = offset * dim.dilation
        ends[axis] = starts[axis] + (dim.out - 1) * dim.stride + 1
        steps[axis] = dim.stride
    return prims.slice(x, starts, ends, steps)


def _constant_vector(values: list[int], dtype: torch.dtype, device: Any) -> TensorProxy:
    """A 1-d constant, one `full` per run of equal values (a window count varies only at the edges)."""
    runs = [(value, len(list(group))) for value, group in itertools.groupby(values)]
    parts = [prims.full([length], value, dtype, device) for value, length in runs]
    return parts[0] if len(parts) == 1 else prims.cat(parts, 0)


def _window_counts(dim: _Dim, count_include_pad: bool, dtype: torch.dtype, device: Any) -> int | TensorProxy:
    """Eager's divisor per window along one dim: the window's length inside the padded input, or
    inside the input alone (count_include_pad=False); a window's part past the padding never counts.
    An int where every window has the same, else a vector of one per window."""
    if dim.static():
        counts = []
        for start in dim.starts():
            end = min(start + dim.kernel, dim.size + dim.padding)
            counts.append(end - start if count_include_pad else min(end, dim.size) - max(start, 0))
        return counts[0] if len(set(counts)) == 1 else _constant_vector(counts, dtype, device)
    if not dim.ceil_mode and (count_include_pad or dim.padding == 0):
        return dim.kernel  # NOTE: every window lies inside the padded input
    start = dim.start_positions(device)
    end = prims.minimum(prims.add(start, dim.kernel), dim.size + dim.padding)
    if not count_include_pad:
        start, end = prims.maximum(start, 0), prims.minimum(end, dim.size)
    return to_dtype(prims.sub(end, start), dtype)


def _avg_pool(
    name: str,
    input: Any,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Any,
    pooled: int,
) -> TensorProxy:
    dims = _geometry(name, input, kernel_size, stride, padding, 1, ceil_mode, pooled, whole_kernel=pooled == 3)
    check(
        divisor_override is None or (isinstance(divisor_override, int) and divisor_override != 0),
        lambda: f"{name}: divisor_override must be None or a nonzero int, got {divisor_override!r}{called_at()}",
        RuntimeError,
    )
    first = input.ndim - pooled
    floating = dtypes.is_float(input.dtype)
    # NOTE: bf16/f16 are summed in float32 and rounded once, as eager's kernels accumulate
    compute = input.dtype if not floating or input.dtype == torch.float64 else torch.float32
    x = to_dtype(input, compute)
    for offset, dim in enumerate(dims):
        axis = first + offset
        x = _padded(x, axis, dim.padding, dim.after, 0)
        windows = [_offset_slice(x, [axis], [dim], (o,)) for o in range(dim.kernel)]
        x = windows[0]
        for window in windows[1:]:
            x = prims.add(x, window)
    if divisor_override is not None:
        divisor: Any = divisor_override
    else:
        divisor_dtype = compute if floating else torch.int64
        counts = [_window_counts(dim, count_include_pad, divisor_dtype, input.device) for dim in dims]
        divisor = math.prod(c for c in counts if isinstance(c, int))
        spread = [
            prims.broadcast_in_dim(c, list(x.shape[first:]), [offset])
            for offset, c in enumerate(counts)
            if isinstance(c, TensorProxy)
        ]
        if spread:
            product = functools.reduce(prims.mul, spread)
            divisor = product if divisor == 1 else prims.mul(product, divisor)
    averaged = div(x, divisor) if floating else div(x, divisor, rounding_mode="trunc")
    return to_dtype(averaged, input.dtype)


def _lowest(dtype: torch.dtype) -> float | int:
    return -math.inf if dtypes.is_float(dtype) else torch.iinfo(dtype).min


def _positions(dim: _Dim, offset: int, device: Any) -> TensorProxy:
    """The input position (along its dim) of the element at `offset` of each window."""
    return prims.iota(dim.out, offset * dim.dilation - dim.padding, dim.stride, torch.int64, device)


def _first_inside(dim: _Dim, device: Any) -> TensorProxy:
    """Each window's first position at or past the input's start (the first of its elements there)."""
    if dim.static():
        starts = [start + -(min(start, 0) // dim.dilation) * dim.dilation for start in dim.starts()]
        return _constant_vector(starts, torch.int64, device)
    start = dim.start_positions(device)
    skipped = prims.neg(prims.floor_divide(prims.minimum(start, 0), dim.dilation))
    return prims.add(start, prims.mul(skipped, dim.dilation))


def _max_pool(
    name: str,
    input: Any,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    ceil_mode: bool,
    return_indices: bool,
    pooled: int,
) -> Any:
    dims = _geometry(name, input, kernel_size, stride, padding, dilation, ceil_mode, pooled)
    first = input.ndim - pooled
    axes = list(range(first, input.ndim))
    padded = any(dim.padding or dim.after for dim in dims)
    x = input
    for axis, dim in zip(axes, dims):
        x = _padded(x, axis, dim.padding, dim.after, _lowest(input.dtype))
    out_shape = [*input.shape[:first], *(dim.out for dim in dims)]

    def spread(t: TensorProxy, offset: int) -> TensorProxy:
        return prims.broadcast_in_dim(t, out_shape, [first + offset])

    scales = [size_product(dim.size for dim in dims[i + 1 :]) for i in range(pooled)]
    best = best_index = best_valid = None
    for offsets in itertools.product(*(range(dim.kernel) for dim in dims)):
        window = _offset_slice(x, axes, dims, offsets)
        index = valid = None
        if return_indices or padded:
            positions = [_positions(dim, o, input.device) for dim, o in zip(dims, offsets)]
        if return_indices:
            # the index into the pooled dims laid out row-major, per (batch, channel), as eager's
            for i, (p, scale) in enumerate(zip(positions, scales)):
                term = spread(prims.mul(p, scale), i)
                index = term if index is None else prims.add(index, term)
        if padded:
            for i, (p, dim) in enumerate(zip(positions, dims)):
                inside = spread(prims.bitwise_and(prims.ge(p, 0), prims.lt(p, dim.size)), i)
                valid = inside if valid is None else prims.bitwise_and(valid, inside)
        if best is None:
            best, best_index, best_valid = window, index, valid
            continue
        replaces = prims.gt(window, best)
        if dtypes.is_float(input.dtype):
            replaces = prims.bitwise_or(replaces, prims.ne(window, window))
        if padded:
            # NOTE: an input element equal to the padding's value (-inf) still replaces padding. Not
            # `eq(best_valid, False)`: Inductor's value ranges cannot compare bools made from indices
            replaces = prims.bitwise_or(replaces, prims.bitwise_and(valid, prims.bitwise_not(best_valid)))
            best_valid = prims.bitwise_or(best_valid, replaces)
        best = prims.where(replaces, window, best)
        if return_indices:
            best_index = prims.where(replaces, index, best_index)
    if return_indices and padded:
        # NOTE: a window of padding only (dilation can skip every input element): eager reports its
        # first position at or past the input's start along each dim
        firsts = []
        for i, dim in enumerate(dims):
            firsts.append(spread(prims.mul(_first_inside(dim, input.device), scales[i]), i))
        best_index = prims.where(best_valid, best_index, functools.reduce(prims.add, firsts))
    if best is window and not padded:
        best = fresh_copy(best)  # NOTE: one-element windows: eager's result is a new tensor all the same
    return (best, best_index) if return_indices else best


def _register_avg(pooled: int, *names: str) -> None:
    name = names[0]

    @register(*names)
    def avg_pool(
        input: TensorProxy,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: Any = None,
    ) -> TensorProxy:
        return _avg_pool(
            name, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, pooled
        )

    avg_pool.__name__ = avg_pool.__qualname__ = f"avg_pool{pooled}d"
    avg_pool.__doc__ = f"F.avg_pool{pooled}d over the last {pooled} dim(s)."


def _register_max(pooled: int, names: tuple[str, ...], with_indices: tuple[str, ...]) -> None:
    name = names[0]

    @register(*names)
    def max_pool(
        input: TensorProxy,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        dilation: Any = 1,
        ceil_mode: bool = False,
        return_indices: bool = False,
    ) -> Any:
        return _max_pool(name, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, pooled)

    @register(*with_indices)
    def max_pool_with_indices(
        input: TensorProxy,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        dilation: Any = 1,
        ceil_mode: bool = False,
        return_indices: bool = True,
    ) -> tuple[TensorProxy, TensorProxy]:
        return _max_pool(with_indices[0], input, kernel_size, stride, padding, dilation, ceil_mode, True, pooled)

    max_pool.__name__ = max_pool.__qualname__ = f"max_pool{pooled}d"
    max_pool.__doc__ = f"F.max_pool{pooled}d over the last {pooled} dim(s): the max, and with return_indices its index."
    max_pool_with_indices.__name__ = max_pool_with_indices.__qualname__ = f"max_pool{pooled}d_with_indices"
    max_pool_with_indices.__doc__ = f"F.max_pool{pooled}d_with_indices: the max and its index."


_register_avg(1, "torch.avg_pool1d")
_register_avg(2, "torch.nn.functional.avg_pool2d")
_register_avg(3, "torch.nn.functional.avg_pool3d")
_register_max(
    1,
    ("torch.nn.functional.max_pool1d", "torch.max_pool1d"),
    ("torch.nn.functional.max_pool1d_with_indices", "torch.max_pool1d_with_indices"),
)
_register_max(
    2, ("torch.nn.functional.max_pool2d", "torch.max_pool2d"), ("torch.nn.functional.max_pool2d_with_indices",)
)
_register_max(
    3, ("torch.nn.functional.max_pool3d", "torch.max_pool3d"), ("torch.nn.functional.max_pool3d_with_indices",)
)
