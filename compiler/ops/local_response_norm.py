"""F.local_response_norm: each element divided by (k + alpha * mean of the squares over a window of
`size` neighbouring channels) ** beta.

The window is zero-padded (size // 2 channels before, (size - 1) // 2 after) and averaged over all
`size` positions, as eager's average pooling of the padded squares with count_include_pad: here a
sum of `size` shifted slices of the padded squares, which fuses, divided by `size` (an integer
input's in integers, as eager's pooling of integers).
"""

from __future__ import annotations

import torch.nn.functional as F

from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy
from compiler.ops.registry import register


@register("torch.nn.functional.local_response_norm")
def local_response_norm(
    input: TensorProxy, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0
) -> TensorProxy:
    """input / (k + alpha * windowed_mean(input ** 2 over channels)) ** beta, for (N, C, ...) inputs."""
    check(
        isinstance(input, TensorProxy) and input.ndim >= 3,
        lambda: (
            f"Expected 3D or higher dimensionality input (got {getattr(input, 'ndim', input)} dimensions){called_at()}"
        ),
        ValueError,
    )
    check(isinstance(size, int) and size > 0, lambda: f"local_response_norm: size must be positive{called_at()}")
    if input.numel() == 0:
        return input
    channels = input.shape[1]
    squares = input * input
    padding = [0, 0] * (input.ndim - 2) + [size // 2, (size - 1) // 2]
    padded = F.pad(squares, padding)
    window = padded.narrow(1, 0, channels)
    for shift in range(1, size):
        window = window + padded.narrow(1, shift, channels)
    # NOTE: eager's average pooling of integer squares divides in integers (truncating)
    mean = window / size if input.dtype.is_floating_point else window // size
    div = (mean * alpha + k) ** beta
    return input / div
