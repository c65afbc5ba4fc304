"""Transposed convolutions: torch.conv_transpose1d, 2d and 3d (what `nn.ConvTranspose*d` and
`F.conv_transpose*d` call).

A transposed convolution of x by w is the gradient of the convolution by w with respect to its
input, so each is one `prims.convolution_backward` with only the input's cotangent asked for: x
plays the output's cotangent and a tensor of the transposed convolution's output shape (`empty`:
torch reads only its sizes) the convolution's input. That is the kernel eager's transposed
convolution runs (cuDNN's backward-data on CUDA), with no prim of its own; autodiff differentiates
it (`vjp_library`). The bias is added after it.

That input's size fixes the output's: a convolution of stride s maps s sizes to one, so
`output_padding` below the stride picks among them. torch also allows an `output_padding` up to the
dilation; along such a dim the convolution is taken unpadded, all of its positions, and then cut to
the output's by `F.pad` (its positions past the inputs' reach are zeros).
"""

from __future__ import annotations

from typing import Any

from compiler import prims
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy
from compiler.ops.convolution import per_dim
from compiler.ops.padding import pad as pad_op
from compiler.ops.registry import register


def _checked(name: str, spatial: int, input: Any, weight: Any, bias: Any, groups: Any) -> None:
    check(
        isinstance(input, TensorProxy) and isinstance(weight, TensorProxy),
        lambda: f"{name}: input and weight must be tensors{called_at()}",
        TypeError,
    )
    check(
        input.ndim in (spatial + 1, spatial + 2) and weight.ndim == spatial + 2,
        lambda: (
            f"{name}: expected a {spatial + 1}-d (unbatched) or {spatial + 2}-d input and a {spatial + 2}-d weight, "
            f"got {input.name} {input.type_string()} and {weight.name} {weight.type_string()}{called_at()}"
        ),
        ValueError,
    )
    check(
        input.dtype == weight.dtype and (bias is None or (isinstance(bias, TensorProxy) and bias.dtype == input.dtype)),
        lambda: f"{name}: input {input.dtype}, weight {weight.dtype} and bias must share a dtype{called_at()}",
        TypeError,
    )
    check(
        isinstance(groups, int) and groups >= 1 and input.shape[-spatial - 1] == weight.shape[0],
        lambda: (
            f"{name}: input {input.name} {input.type_string()} must have weight.shape[0] = {weight.shape[0]} "
            f"channels and groups a positive int, got groups={groups!r}{called_at()}"
        ),
        ValueError,
    )


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
    _checked(name, spatial, input, weight, bias, groups)
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
    kernel = weight.shape[2:]
    sizes = [
        (n - 1) * s - 2 * p + d * (k - 1) + 1 + o
        for n, s, p, d, k, o in zip(x.shape[2:], stride, padding, dilation, kernel, output_padding)
    ]
    # NOTE: an output_padding of the stride or more (dilation > stride) has no convolution input of that
    # size: along such a dim the convolution is taken unpadded and cut to the output's positions after.
    beyond = [o >= s for s, o in zip(stride, output_padding)]
    taken_padding = [0 if b else p for b, p in zip(beyond, padding)]
    taken_sizes = [
        (n - 1) * s + d * (k - 1) + 1 if b else size
        for b, n, s, d, k, size in zip(beyond, x.shape[2:], stride, dilation, kernel, sizes)
    ]
    channels = weight.shape[1] * groups
    stand_in = prims.empty([x.shape[0], channels, *taken_sizes], x.dtype, x.device)
    geometry = (stride, taken_padding, dilation, groups)
    (out,) = prims.convolution_backward(x, stand_in, weight, *geometry, (True, False, False))
    if any(beyond):
        pads = []
        for b, p, size, taken in reversed(list(zip(beyond, padding, sizes, taken_sizes))):
            pads += [-p, size + p - taken] if b else [0, 0]
        out = pad_op(out, pads)
    if bias is not None:
        out = prims.add(out, prims.broadcast_in_dim(bias, list(out.shape), [1]))
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

    transposed.__doc__ = f"{name}: one input-cotangent prims.convolution_backward over {spatial} spatial dim(s)."


for _spatial in (1, 2, 3):
    _register(_spatial)
