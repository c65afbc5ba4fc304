"""`F.fold` (col2im): sliding blocks, one per column, summed back into a batched image; the
inverse pattern of `F.unfold` (unfold.py).

For an input [N, C * kh * kw, L] (or unbatched) and an output of H x W, column b = bh * out_w + bw
holds its block's elements, kernel offset (i, j) at row c * kh * kw + i * kw + j; that element
lands at (bh * stride_h + i * dilation_h, bw * stride_w + j * dilation_w) of the padded image.
Those positions, flattened over the padded image, are computed (`strided_positions`) and the
columns added there with one `index_add` into zeros, elements that share a position summed; the
padding is then cut off. Its gradient is an `index_select` of the same positions (unfold's).
bf16/f16 columns are summed in float32 and rounded once, as eager's CUDA kernel accumulates.
Sizes are specialised (guarded) to their values: the positions depend on them.
"""

from __future__ import annotations

from typing import Any

import torch

from compiler import prims
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy
from compiler.ops.as_strided import strided_positions
from compiler.ops.operands import to_dtype
from compiler.ops.registry import register
from compiler.ops.unfold import pair


@register("torch.nn.functional.fold")
def fold(
    input: TensorProxy, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1
) -> TensorProxy:
    """Sums the sliding blocks held in the columns of `input` into an image of `output_size`."""
    check(
        isinstance(input, TensorProxy) and input.ndim in (2, 3),
        lambda: f"F.fold: expected a 2-d or 3-d tensor of columns, got {input!r}{called_at()}",
        ValueError,
    )
    sizes, kernel = pair("F.fold", "output_size", output_size, True), pair("F.fold", "kernel_size", kernel_size, True)
    dilations, paddings = pair("F.fold", "dilation", dilation, True), pair("F.fold", "padding", padding, False)
    strides = pair("F.fold", "stride", stride, True)
    x = input if input.ndim == 3 else prims.broadcast_in_dim(input, [1, *input.shape], [1, 2])
    # NOTE: the positions depend on the sizes: symbolic ones are specialised (guarded) to their values
    batch, rows, columns = int(x.shape[0]), int(x.shape[1]), int(x.shape[2])
    blocks = [
        (n + 2 * p - d * (k - 1) - 1) // s + 1 for n, k, d, p, s in zip(sizes, kernel, dilations, paddings, strides)
    ]
    patch = kernel[0] * kernel[1]
    check(
        rows % patch == 0 and blocks[0] >= 1 and blocks[1] >= 1 and columns == blocks[0] * blocks[1],
        lambda: (
            f"F.fold: {input.name} {input.type_string()} must have channels x {patch} rows and {blocks[0]} x "
            f"{blocks[1]} columns (the blocks of kernel_size={kernel}, dilation={dilations}, padding={paddings}, "
            f"stride={strides} in an image of {sizes[0]}x{sizes[1]}){called_at()}"
        ),
        RuntimeError,
    )
    channels = rows // patch
    height, width = sizes[0] + 2 * paddings[0], sizes[1] + 2 * paddings[1]
    grid = [kernel[0], kernel[1], blocks[0], blocks[1]]
    steps = [dilations[0] * width, dilations[1], strides[0] * width, strides[1]]
    positions = strided_positions(grid, steps, 0, x.device)
    compute = torch.float32 if x.dtype in (torch.bfloat16, torch.float16) else x.dtype
    values = prims.reshape(to_dtype(x, compute), [batch, channels, patch * columns])
    image = prims.index_add(prims.full([batch, channels, height * width], 0, compute, x.device), 2, positions, values)
    image = prims.reshape(image, [batch, channels, height, width])
    if any(paddings):
        starts = [0, 0, paddings[0], paddings[1]]
        image = prims.slice(image, starts, [batch, channels, height - paddings[0], width - paddings[1]], [1, 1, 1, 1])
    image = to_dtype(image, x.dtype)
    return image if input.ndim == 3 else prims.squeeze(image, (0,))
