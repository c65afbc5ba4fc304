"""Transposed convolutions: torch.conv_transpose1d, 2d and 3d (what `nn.ConvTranspose*d` and
`F.conv_transpose*d` call).

Each is one `prims.convolution_transpose`: the kernel eager's transposed convolution runs
(`aten.convolution` with transposed=True: cuDNN's backward-data on CUDA), so the bias is added as
eager adds it (inside the kernel's accumulation on CPU, before bfloat16 rounds) and integer tensors
are convolved where the device's kernel has them, as eager's CPU kernels do. torch allows an
`output_padding` below the stride or the dilation, whichever is larger; autodiff differentiates the
prim (`vjp_library`).
"""

from __future__ import annotations

from typing import Any

from compiler import prims
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy
from compiler.ops.convolution import check_operands, per_dim
from compiler.ops.registry import register


def conv_transpose(
    name: str,
    spatial: int,
    input: Any,
    weight: Any,
    bias: Any,
    stride: Any,
    padding: Any,
    output_padding: Any,
    groups: Any,
    dilation: Any,
) -> TensorProxy:
    """The transposed convolution of `input` [N, C_in, *sizes] (or unbatched) by `weight`
    [C_in, C_out / groups, *kernel] over `spatial` dims, as torch.conv_transpose<spatial>d."""
    check_operands(name, spatial, input, weight, bias, groups)
    check(
        input.shape[-spatial - 1] == weight.shape[0],
        lambda: (
            f"{name}: input {input.name} {input.type_string()} must have weight.shape[0] = {weight.shape[0]} "
            f"channels{called_at()}"
        ),
        ValueError,
    )
    stride, padding = per_dim(name, "stride", stride, spatial), per_dim(name, "padding", padding, spatial)
    output_padding = per_dim(name, "output_padding", output_padding, spatial)
    dilation = per_dim(name, "dilation", dilation, spatial)
    for s, d, p, o in zip(stride, dilation, padding, output_padding):
        check(
            s >= 1 and d >= 1 and p >= 0 and 0 <= o < max(s, d),
            lambda: (
                f"{name}: needs stride and dilation >= 1, padding >= 0 and 0 <= output_padding < max(stride, "
                f"dilation), got stride={stride}, padding={padding}, output_padding={output_padding}, "
                f"dilation={dilation}{called_at()}"
            ),
            ValueError,
        )
    unbatched = input.ndim == spatial + 1
    x = prims.broadcast_in_dim(input, [1, *input.shape], list(range(1, input.ndim + 1))) if unbatched else input
    out = prims.convolution_transpose(x, weight, bias, stride, padding, dilation, groups, output_padding)
    return prims.squeeze(out, (0,)) if unbatched else out


def _register(spatial: int) -> None:
    name = f"torch.conv_transpose{spatial}d"

    @register(name)
    def transposed(
        input: Any,
        weight: Any,
        bias: Any = None,
        stride: Any = 1,
        padding: Any = 0,
        output_padding: Any = 0,
        groups: Any = 1,
        dilation: Any = 1,
    ) -> TensorProxy:
        return conv_transpose(name, spatial, input, weight, bias, stride, padding, output_padding, groups, dilation)

    transposed.__doc__ = f"{name}: one prims.convolution_transpose over {spatial} spatial dim(s)."


for _spatial in (1, 2, 3):
    _register(_spatial)
