"""Ops written as calls of other torch ops on the proxies (each call goes through `dispatch`, so
the op records what those ops decompose into): the shrink and sign activations, softmin, dist,
pixel (un)shuffle, channel shuffle, rot90, isin, take, slice/select scatters, channel dropout, instance norm.

Each matches eager's result dtype and raises eager's errors for the argument checks it makes;
what it does not support (instance norm updating running statistics) is refused with one line.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy
from compiler.ops.registry import register


@register("torch.nn.functional.softsign")
def softsign(input: TensorProxy) -> Any:
    return input / (input.abs() + 1)


@register("torch.nn.functional.tanhshrink")
def tanhshrink(input: TensorProxy) -> Any:
    return input - input.tanh()


def _upcast(input: TensorProxy) -> TensorProxy:
    """`input` in float32 where it is bf16/fp16: eager's kernels compare it with a threshold so."""
    return input.float() if input.dtype in (torch.float16, torch.bfloat16) else input


@register("torch.nn.functional.hardshrink", "torch.hardshrink", "torch.Tensor.hardshrink")
def hardshrink(input: TensorProxy, lambd: float = 0.5) -> Any:
    x = _upcast(input)
    return torch.where((x > lambd) | (x < -lambd), input, 0.0)


@register("torch.nn.functional.softshrink")
def softshrink(input: TensorProxy, lambd: float = 0.5) -> Any:
    check(lambd >= 0, lambda: f"softshrink: lambd must be at least 0, got {lambd}{called_at()}", RuntimeError)
    x = _upcast(input)
    return torch.where(x > lambd, x - lambd, torch.where(x < -lambd, x + lambd, 0.0)).to(input.dtype)


@register("torch.nn.functional.softmin")
def softmin(input: TensorProxy, dim: int | None = None, _stacklevel: int = 3, dtype: torch.dtype | None = None) -> Any:
    check(dim is not None, lambda: f"softmin: give the dim to normalise over{called_at()}", TypeError)
    return torch.softmax(-input if dtype is None else -input.to(dtype), dim)


@register("torch.dist", "torch.Tensor.dist")
def dist(input: TensorProxy, other: Any, p: float = 2) -> Any:
    return torch.linalg.vector_norm(input - other, p)


@register("torch.nn.functional.pixel_shuffle", "torch.pixel_shuffle")
def pixel_shuffle(input: TensorProxy, upscale_factor: int) -> Any:
    r = upscale_factor
    *batch, c, h, w = input.shape
    check(
        input.ndim >= 3 and c % (r * r) == 0,
        lambda: f"pixel_shuffle: channels ({c}) must be divisible by upscale_factor squared ({r * r}){called_at()}",
        RuntimeError,
    )
    x = input.reshape(*batch, c // (r * r), r, r, h, w)
    n = len(batch)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return x.reshape(*batch, c // (r * r), h * r, w * r)


@register("torch.nn.functional.pixel_unshuffle", "torch.pixel_unshuffle")
def pixel_unshuffle(input: TensorProxy, downscale_factor: int) -> Any:
    r = downscale_factor
    *batch, c, h, w = input.shape
    check(
        input.ndim >= 3 and h % r == 0 and w % r == 0,
        lambda: f"pixel_unshuffle: height {h} and width {w} must be divisible by downscale_factor {r}{called_at()}",
        RuntimeError,
    )
    x = input.reshape(*batch, c, h // r, r, w // r, r)
    n = len(batch)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return x.reshape(*batch, c * r * r, h // r, w // r)


@register("torch.channel_shuffle", "torch.native_channel_shuffle")
def channel_shuffle(input: TensorProxy, groups: int) -> Any:
    """The channels (dim 1) read as [groups, C / groups] and transposed: channel g * (C / groups) + i
    moves to i * groups + g."""
    check(
        input.ndim >= 3,
        lambda: (
            f"channel_shuffle expects input to have at least 3 dimensions, but got input with sizes "
            f"{list(input.shape)}{called_at()}"
        ),
        RuntimeError,
    )
    check(
        groups > 0,
        lambda: f"Number of groups to divide channels in must be positive. Value of groups:{groups}",
        RuntimeError,
    )
    n, c, *rest = input.shape
    check(
        c % groups == 0,
        lambda: f"Number of channels must be divisible by groups. Got {c} channels and {groups} groups.{called_at()}",
        RuntimeError,
    )
    x = input.reshape(n, groups, c // groups, *rest).transpose(1, 2)
    return x.reshape(input.shape)


@register("torch.rot90", "torch.Tensor.rot90")
def rot90(input: TensorProxy, k: int = 1, dims: Any = (0, 1)) -> Any:
    check(
        len(dims) == 2 and input.ndim >= 2,
        lambda: f"rot90 expects two dims of a tensor of at least 2 dims, got dims={list(dims)}{called_at()}",
        RuntimeError,
    )
    a, b = dims
    k %= 4
    if k == 1:
        return input.flip(b).transpose(a, b)
    if k == 2:
        return input.flip(a, b)
    if k == 3:
        return input.flip(a).transpose(a, b)
    return input.clone()


@register("torch.isin")
def isin(elements: Any, test_elements: Any, *, assume_unique: bool = False, invert: bool = False) -> Any:
    if not isinstance(elements, TensorProxy):
        elements = torch.tensor(elements)
    if isinstance(test_elements, TensorProxy):
        found = (elements.unsqueeze(-1) == test_elements.reshape(-1)).any(-1)
    else:
        found = elements == test_elements
    return ~found if invert else found


@register("torch.take", "torch.Tensor.take")
def take(input: TensorProxy, index: TensorProxy) -> Any:
    return input.reshape(-1)[index]


@register("torch.slice_scatter", "torch.Tensor.slice_scatter")
def slice_scatter(input: TensorProxy, src: Any, dim: int = 0, start: Any = None, end: Any = None, step: int = 1):
    result = input.clone()
    key = [slice(None)] * input.ndim
    key[dim] = slice(start, end, step)
    result[tuple(key)] = src
    return result


@register("torch.select_scatter", "torch.Tensor.select_scatter")
def select_scatter(input: TensorProxy, src: TensorProxy, dim: int, index: int) -> Any:
    result = input.clone()
    result.select(dim, index).copy_(src)
    return result


def _channel_dropout(name: str, input: TensorProxy, p: float, training: bool, inplace: bool, dims: int) -> Any:
    check(0.0 <= p <= 1.0, lambda: f"{name}: p must be in [0, 1], got {p}{called_at()}", ValueError)
    batched = input.ndim == dims + 2
    check(
        batched or input.ndim == dims + 1,
        lambda: f"{name}: expected a {dims + 1}-D or {dims + 2}-D input, got {input.ndim}-D{called_at()}",
        RuntimeError,
    )
    if not training or p == 0.0:
        return input
    channels = input.shape[: input.ndim - dims]
    keep = F.dropout(input.new_ones((*channels, *([1] * dims))), p)
    return input.mul_(keep) if inplace else input * keep


@register("torch.nn.functional.dropout1d")
def dropout1d(input: TensorProxy, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:
    return _channel_dropout("dropout1d", input, p, training, inplace, 1)


@register("torch.nn.functional.dropout2d")
def dropout2d(input: TensorProxy, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:
    return _channel_dropout("dropout2d", input, p, training, inplace, 2)


@register("torch.nn.functional.dropout3d")
def dropout3d(input: TensorProxy, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:
    return _channel_dropout("dropout3d", input, p, training, inplace, 3)


@register("torch.nn.functional.instance_norm")
def instance_norm(
    input: TensorProxy,
    running_mean: Any = None,
    running_var: Any = None,
    weight: Any = None,
    bias: Any = None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Any:
    """Each (sample, channel) normalised over its other dims; with running statistics, as eager:
    updated in place by the batch's mean of the instances' means and unbiased variances, or used
    instead of the input's (`use_input_stats=False`)."""
    check(input.ndim >= 3, lambda: f"instance_norm needs (N, C, ...), got {input.ndim}-D{called_at()}", ValueError)
    check(
        use_input_stats or (running_mean is not None and running_var is not None),
        lambda: f"instance_norm: expected running_mean and running_var when use_input_stats=False{called_at()}",
        ValueError,
    )
    dims = tuple(range(2, input.ndim))
    shape = (1, -1) + (1,) * len(dims)
    x = input.float() if input.dtype in (torch.float16, torch.bfloat16) else input
    if use_input_stats:
        var, mean = torch.var_mean(x, dims, correction=0, keepdim=True)
        count = x[0, 0].numel()
        with torch.no_grad():
            if running_mean is not None:
                running_mean.mul_(1 - momentum).add_(mean.detach().mean(0).reshape(-1) * momentum)
            if running_var is not None:
                unbiased = var.detach() * (count / max(count - 1, 1))
                running_var.mul_(1 - momentum).add_(unbiased.mean(0).reshape(-1) * momentum)
    else:
        mean, var = running_mean.reshape(shape), running_var.reshape(shape)
    # NOTE: as eager's batch norm kernel: x * scale + shift, scale = w / sqrt(var + eps), shift = b - mean * scale
    scale = torch.rsqrt(var + eps)
    scale = scale * weight.float().reshape(shape) if weight is not None else scale
    shift = -mean * scale
    shift = shift + bias.float().reshape(shape) if bias is not None else shift
    return (x * scale + shift).to(input.dtype)
