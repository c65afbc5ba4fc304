"""Batch normalisation (`F.batch_norm`, what `nn.BatchNorm*d` calls: a ResNet's or a ConvNeXt-era
CNN's normaliser).

Statistics are per channel (dim 1) over every other dim. In training, or without running
statistics, the batch's are used (the biased variance normalises) and the running ones, where
given, are updated in place as eager updates them: `(1 - momentum) * running + momentum * batch`,
with the unbiased variance. In eval the running statistics normalise. bf16/f16 inputs compute in
float32 and round once.
"""

from __future__ import annotations

import math
from typing import Any

from compiler import prims
from compiler.core import dtypes
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy, same_size
from compiler.ops.operands import to_dtype
from compiler.ops.reductions import count, expand_reduced
from compiler.ops.registry import register
from compiler.ops.writes import write


def _per_channel(t: TensorProxy, shape: list, compute: Any) -> TensorProxy:
    """A [channels] tensor broadcast along dim 1 of `shape`, in the compute dtype."""
    return prims.broadcast_in_dim(to_dtype(t, compute), shape, [1])


def _update_running(running: Any, batch: TensorProxy, momentum: float) -> None:
    if running is None:
        return
    updated = prims.add(prims.mul(to_dtype(running, batch.dtype), 1.0 - momentum), prims.mul(batch, momentum))
    write(running, to_dtype(updated, running.dtype), "torch.nn.functional.batch_norm (running statistics)")


@register("torch.nn.functional.batch_norm")
def batch_norm(
    input: TensorProxy,
    running_mean: Any,
    running_var: Any,
    weight: Any = None,
    bias: Any = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> TensorProxy:
    """F.batch_norm: normalises each channel (dim 1) with the batch's or the running statistics."""
    name = "torch.nn.functional.batch_norm"
    check(
        isinstance(input, TensorProxy) and input.ndim >= 2,
        lambda: f"{name}: expected an input of rank >= 2 ([batch, channels, ...]){called_at()}",
        ValueError,
    )
    channels = input.shape[1]
    for what, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight), ("bias", bias)):
        check(
            t is None or (isinstance(t, TensorProxy) and t.ndim == 1 and same_size(t.shape[0], channels)),
            lambda what=what: f"{name}: {what} must be None or a vector of {channels} entries{called_at()}",
            ValueError,
        )
    use_batch = training or running_mean is None or running_var is None
    check(
        isinstance(momentum, (int, float)) or not use_batch or running_mean is None,
        lambda: (
            f"{name}: momentum must be a number where running statistics are updated, got {momentum!r}{called_at()}"
        ),
        TypeError,
    )
    # NOTE: a symbolic size is never 1 (sizes 0 and 1 keep entries of their own), so only a
    # batch whose sizes are all known can hold one value per channel
    values = [input.shape[d] for d in range(input.ndim) if d != 1]
    check(
        not training or not all(isinstance(v, int) for v in values) or math.prod(values) != 1,
        lambda: f"Expected more than 1 value per channel when training, got input size {list(input.shape)}",
        ValueError,
    )
    compute = dtypes.compute_dtype(input.dtype)
    x = to_dtype(input, compute)
    shape = list(x.shape)
    dims = tuple(d for d in range(x.ndim) if d != 1)
    if use_batch:
        n = count(x.shape, dims)
        mean = prims.div(prims.sum(x, dims), n)
        centered = prims.sub(x, expand_reduced(mean, shape, dims))
        squares = prims.sum(prims.mul(centered, centered), dims)
        variance = prims.div(squares, n)
        if training:
            # NOTE: running statistics never carry a gradient (eager updates them under no_grad)
            _update_running(running_mean, prims.stop_gradient(mean), momentum)
            _update_running(running_var, prims.stop_gradient(prims.div(squares, n - 1)), momentum)
    else:
        mean, variance = to_dtype(running_mean, compute), to_dtype(running_var, compute)
        centered = prims.sub(x, _per_channel(mean, shape, compute))
    out = prims.mul(centered, _per_channel(prims.rsqrt(prims.add(variance, eps)), shape, compute))
    if weight is not None:
        out = prims.mul(out, _per_channel(weight, shape, compute))
    if bias is not None:
        out = prims.add(out, _per_channel(bias, shape, compute))
    return to_dtype(out, input.dtype)
