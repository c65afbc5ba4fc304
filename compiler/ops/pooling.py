"""Adaptive average pooling (`F.adaptive_avg_pool1d`/`2d`: a vision or speech model's pooler) and
max pooling (`F.max_pool2d`: a ResNet's stem).

Output cell i of a dim of size `size` pooled to `out` averages the input over
[floor(i * size / out), ceil((i + 1) * size / out)). The window is a product of one interval per
pooled dim, so the 2-d pooling is the 1-d pooling applied per dim. One window is a mean; where
`out` divides `size` the windows tile the dim: one reshape and one mean; otherwise each window is
a slice and a mean, laid end to end. Except for one window, a symbolic size is specialised
(guarded) to its value: the windows depend on it.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from compiler import prims
from compiler.core import dtypes
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy
from compiler.ops.padding import pad as pad_op
from compiler.ops.reductions import mean
from compiler.ops.registry import register


def _pooled_dim(x: TensorProxy, dim: int, out: int) -> TensorProxy:
    if out == 1:  # one window: the mean, over a symbolic size too
        return mean(x, dim, keepdim=True)
    # NOTE: other windows need the size's value: a symbolic size is specialised (guarded) to it
    size = int(x.shape[dim])
    if out == size:
        return x
    if size % out == 0:
        shape = [*x.shape[:dim], out, size // out, *x.shape[dim + 1 :]]
        return mean(prims.reshape(x, shape), dim + 1)
    windows = []
    for i in range(out):
        start, end = (i * size) // out, -((-(i + 1) * size) // out)
        starts = [0] * x.ndim
        ends = list(x.shape)
        starts[dim], ends[dim] = start, end
        windows.append(mean(prims.slice(x, starts, ends, [1] * x.ndim), dim, keepdim=True))
    return prims.cat(windows, dim)


def _adaptive_avg_pool(name: str, input: Any, output_size: Any, pooled: int) -> TensorProxy:
    check(
        isinstance(input, TensorProxy) and input.ndim in (pooled + 1, pooled + 2),
        lambda: f"{name}: expected a {pooled + 1}-d or {pooled + 2}-d tensor{called_at()}",
        ValueError,
    )
    sizes = list(output_size) if isinstance(output_size, (tuple, list)) else [output_size] * pooled
    check(
        len(sizes) == pooled,
        lambda: f"{name}: output_size must be an int or {pooled} ints, got {output_size!r}{called_at()}",
        ValueError,
    )
    first = input.ndim - pooled
    result = input
    for offset, out in enumerate(sizes):
        dim = first + offset
        out = int(input.shape[dim]) if out is None else out
        check(
            isinstance(out, int) and out >= 1,
            lambda out=out: f"{name}: output sizes must be positive ints, got {out!r}{called_at()}",
            NotImplementedError,
        )
        result = _pooled_dim(result, dim, out)
    return result


@register("torch.adaptive_avg_pool1d")
def adaptive_avg_pool1d(input: TensorProxy, output_size: Any) -> TensorProxy:
    """F.adaptive_avg_pool1d over the last dim."""
    return _adaptive_avg_pool("torch.adaptive_avg_pool1d", input, output_size, 1)


@register("torch.nn.functional.adaptive_avg_pool2d")
def adaptive_avg_pool2d(input: TensorProxy, output_size: Any) -> TensorProxy:
    """F.adaptive_avg_pool2d over the last two dims."""
    return _adaptive_avg_pool("torch.nn.functional.adaptive_avg_pool2d", input, output_size, 2)


def _max_pool(
    name: str, input: Any, kernel_size: Any, stride: Any, padding: Any, dilation: Any, ceil_mode: bool, pooled: int
) -> TensorProxy:
    """The max over each window as a scan over the window's offsets: a later element replaces the
    running max only where it is greater (or NaN), so the gradient goes to the window's first
    maximum, as eager's kernels give it."""
    check(
        isinstance(input, TensorProxy) and input.ndim in (pooled + 1, pooled + 2) and dtypes.is_float(input.dtype),
        lambda: f"{name}: expected a floating {pooled + 1}-d or {pooled + 2}-d tensor{called_at()}",
        ValueError,
    )
    kernel = _ints(name, "kernel_size", kernel_size, pooled)
    stride = _ints(name, "stride", stride if stride not in (None, []) else kernel, pooled)
    padding = _ints(name, "padding", padding, pooled)
    dilation = _ints(name, "dilation", dilation, pooled)
    first = input.ndim - pooled
    sizes = [int(input.shape[first + i]) for i in range(pooled)]
    outs = [
        (size + 2 * p - d * (k - 1) - 1) // s + 1 for size, k, s, p, d in zip(sizes, kernel, stride, padding, dilation)
    ]
    check(
        not ceil_mode or all((o - 1) * s >= size + p for o, s, size, p in zip(outs, stride, sizes, padding)),
        lambda: f"{name}: ceil_mode=True is supported only where it adds no window{called_at()}",
        NotImplementedError,
    )
    if any(padding):
        pads = [amount for p in reversed(padding) for amount in (p, p)]
        input = pad_op(input, pads, value=-math.inf)
    best = None
    for offsets in itertools.product(*(range(k) for k in kernel)):
        starts, ends, steps = [0] * input.ndim, list(input.shape), [1] * input.ndim
        for i, offset in enumerate(offsets):
            starts[first + i] = offset * dilation[i]
            ends[first + i] = starts[first + i] + (outs[i] - 1) * stride[i] + 1
            steps[first + i] = stride[i]
        window = prims.slice(input, starts, ends, steps)
        if best is None:
            best = window
        else:
            replaces = prims.bitwise_or(prims.gt(window, best), prims.ne(window, window))
            best = prims.where(replaces, window, best)
    return best


def _ints(name: str, what: str, value: Any, pooled: int) -> list[int]:
    values = list(value) if isinstance(value, (tuple, list)) else [value] * pooled
    values = values * pooled if len(values) == 1 else values
    check(
        len(values) == pooled and all(isinstance(v, int) and not isinstance(v, bool) for v in values),
        lambda: f"{name}: {what} must be an int or {pooled} ints, got {value!r}{called_at()}",
        ValueError,
    )
    return values


@register("torch.nn.functional.max_pool2d")
def max_pool2d(
    input: TensorProxy,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> TensorProxy:
    """F.max_pool2d (without return_indices) over the last two dims."""
    name = "torch.nn.functional.max_pool2d"
    check(not return_indices, lambda: f"{name}: return_indices=True is not supported{called_at()}", NotImplementedError)
    return _max_pool(name, input, kernel_size, stride, padding, dilation, ceil_mode, 2)
