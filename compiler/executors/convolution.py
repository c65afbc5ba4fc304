"""Convolutions run by torch's kernels (cuDNN on CUDA), forward and backward.

nvFuser has no convolution; these are the torch executor's implementations of `prims.convolution`,
`prims.convolution_backward` and `prims.convolution_transpose`, through the aten ops eager autograd
calls, so results match eager's bit for bit where the kernels are deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def convolution(
    a: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    groups: int,
) -> torch.Tensor:
    """aten.convolution without transposition: what torch.conv1d/2d/3d run."""
    no_output_padding = [0] * len(stride)
    return torch.ops.aten.convolution(a, weight, bias, stride, padding, dilation, False, no_output_padding, groups)


def convolution_backward(
    grad: torch.Tensor,
    a: torch.Tensor,
    weight: torch.Tensor,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    groups: int,
    output_mask: Sequence[bool],
) -> tuple[torch.Tensor, ...]:
    """aten.convolution_backward: the cotangents of (a, weight, bias) that `output_mask` asks for."""
    bias_sizes = [weight.shape[0]] if output_mask[2] else None
    no_output_padding = [0] * len(stride)
    grads = torch.ops.aten.convolution_backward(
        grad, a, weight, bias_sizes, stride, padding, dilation, False, no_output_padding, groups, list(output_mask)
    )
    return tuple(g for g, wanted in zip(grads, output_mask) if wanted)


def convolution_transpose(
    a: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    groups: int,
    output_padding: Sequence[int],
) -> torch.Tensor:
    """aten.convolution with transposition: what torch.conv_transpose1d/2d/3d run (the bias added
    inside the kernel, integer dtypes where the device's kernel has them, as eager)."""
    return torch.ops.aten.convolution(a, weight, bias, stride, padding, dilation, True, output_padding, groups)
