"""`F.unfold` (im2col): every sliding block of a batched image as one column.

For an input [N, C, H, W] (or [C, H, W]) and a kernel kh x kw, the output is [N, C * kh * kw, L]:
row c * kh * kw + i * kw + j holds, for each of the L = out_h * out_w blocks in row-major order,
the element at kernel offset (i, j) of that block. The input is zero-padded; the elements at one
kernel offset of every block are one strided slice of it (as pooling reads its windows,
window_pooling.py), so the output is kh * kw slices stacked after the channel dim: plain data
movement whose gradient (slices scattered back, padding dropped) is the decomposition's own.
A symbolic image size stays symbolic: the block counts are formulas of it.
"""

from __future__ import annotations

from typing import Any

import torch

from compiler import prims
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy
from compiler.ops.padding import pad
from compiler.ops.registry import register
from compiler.ops.shape import reshape, squeeze, stack, unsqueeze


def pair(op: str, what: str, value: Any, positive: bool) -> tuple[int, int]:
    """`value` (an int or two) as two ints, positive or non-negative, else a ValueError naming `op`."""
    values = tuple(value) if isinstance(value, (tuple, list, torch.Size)) else (value, value)
    check(
        len(values) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and (v > 0 if positive else v >= 0) for v in values),
        lambda: (
            f"{op}: {what} must be a {'positive' if positive else 'non-negative'} int or a pair of them, "
            f"got {value!r}{called_at()}"
        ),
        ValueError,
    )
    return values  # type: ignore[return-value]


@register("torch.nn.functional.unfold")
def unfold(input: TensorProxy, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1) -> Any:
    check(
        isinstance(input, TensorProxy) and input.ndim in (3, 4),
        lambda: f"F.unfold: expected a 3-d or 4-d tensor (an image, or a batch of them), got {input!r}{called_at()}",
        ValueError,
    )
    kernel, dilations = pair("F.unfold", "kernel_size", kernel_size, True), pair("F.unfold", "dilation", dilation, True)
    paddings, strides = pair("F.unfold", "padding", padding, False), pair("F.unfold", "stride", stride, True)
    x = input if input.ndim == 4 else unsqueeze(input, 0)
    batch, channels = x.shape[0], x.shape[1]
    sizes = list(x.shape[2:])
    blocks = [
        (n + 2 * p - d * (k - 1) - 1) // s + 1 for n, k, d, p, s in zip(sizes, kernel, dilations, paddings, strides)
    ]
    check(
        all(bool(b >= 1) for b in blocks),
        lambda: (
            f"F.unfold: an image of {sizes[0]}x{sizes[1]} holds no block of kernel_size={kernel}, "
            f"dilation={dilations}, padding={paddings}, stride={strides}{called_at()}"
        ),
        RuntimeError,
    )
    if any(paddings):
        x = pad(x, [paddings[1], paddings[1], paddings[0], paddings[0]])
    offsets = []
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            starts = [0, 0, i * dilations[0], j * dilations[1]]
            ends = [x.shape[0], x.shape[1], *(s + (b - 1) * t + 1 for s, b, t in zip(starts[2:], blocks, strides))]
            offsets.append(prims.slice(x, starts, ends, [1, 1, *strides]))
    columns = reshape(stack(offsets, 2), batch, channels * kernel[0] * kernel[1], blocks[0] * blocks[1])
    return columns if input.ndim == 4 else squeeze(columns, 0)
