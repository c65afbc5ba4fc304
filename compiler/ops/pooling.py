"""Adaptive average pooling (`F.adaptive_avg_pool1d`/`2d`: a vision or speech model's pooler); pooling
over sliding windows (`F.avg_pool2d`, `F.max_pool2d`, ...) is in window_pooling.py.

Output cell i of a dim of size `size` pooled to `out` averages the input over
[floor(i * size / out), ceil((i + 1) * size / out)). The window is a product of one interval per
pooled dim, so the 2-d pooling is the 1-d pooling applied per dim. One window is a mean; where
`out` divides `size` the windows tile the dim: one reshape and one mean; otherwise each window is
a slice and a mean, laid end to end. A symbolic size stays symbolic where one window covers it or
the windows tile it (`out` dividing it is guarded); otherwise it is specialised (guarded) to its
value: the windows' bounds depend on it.
"""

from __future__ import annotations

from typing import Any

from compiler import prims
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy, same_size
from compiler.ops.reductions import mean
from compiler.ops.registry import register


def _pooled_dim(x: TensorProxy, dim: int, out: int) -> TensorProxy:
    if out == 1:  # one window: the mean, over a symbolic size too
        return mean(x, dim, keepdim=True)
    size = x.shape[dim]
    if same_size(out, size):
        return x
    if not isinstance(size, int) and not same_size(size % out, 0):
        size = int(size)  # NOTE: windows of two lengths need the size's value: specialised (guarded) to it
    if same_size(size % out, 0):
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
        if out is None:  # the dim kept as it is
            continue
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
