"""Convolutions: torch.conv1d, conv2d and conv3d (what `nn.Conv*d` and `F.conv*d` call).

Each becomes one `prims.convolution` on operands of one dtype, a batch dim added to an unbatched
input and removed again. String padding is resolved here: "valid" is none, "same" pads
`dilation * (kernel - 1)` in total per dim, the extra one on the right where it is odd (as
torch does, with a zero pad of the input first in that case).
"""

from __future__ import annotations

from typing import Any

from compiler import prims
from compiler.core.errors import called_at, check
from compiler.core.ir import NumberProxy, TensorProxy
from compiler.ops.padding import pad as pad_op
from compiler.ops.registry import register


def per_dim(name: str, what: str, value: Any, spatial: int) -> list[int]:
    values = list(value) if isinstance(value, (tuple, list)) else [value] * spatial
    if len(values) == 1:
        values = values * spatial
    check(
        len(values) == spatial and all(isinstance(v, (int, NumberProxy)) and not isinstance(v, bool) for v in values),
        lambda: f"{name}: {what} must be an int or {spatial} ints, got {value!r}{called_at()}",
        ValueError,
    )
    return values


def _same_padding(
    name: str, input: TensorProxy, weight: TensorProxy, stride: list[int], dilation: list[int]
) -> tuple[TensorProxy, list[int]]:
    """padding="same": the symmetric part as the convolution's padding, an odd extra one by F.pad."""
    check(
        all(s == 1 for s in stride),
        lambda: f"{name}: padding='same' needs stride 1, got stride {stride}{called_at()}",
        ValueError,
    )
    spatial = len(stride)
    totals = [d * (k - 1) for d, k in zip(dilation, weight.shape[2:])]
    extra = [0, 0] * spatial
    for i, total in enumerate(totals):
        extra[2 * (spatial - 1 - i) + 1] = total % 2  # F.pad lists the last dim first, (left, right)
    if any(extra):
        input = pad_op(input, extra)
    return input, [total // 2 for total in totals]


def check_operands(name: str, spatial: int, input: Any, weight: Any, bias: Any, groups: Any) -> None:
    """Checks a (transposed) convolution's tensors and groups as eager's argument checks do."""
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
        isinstance(groups, int) and groups >= 1,
        lambda: f"{name}: groups must be a positive int, got {groups!r}{called_at()}",
        ValueError,
    )


def _convolution(
    name: str, spatial: int, input: Any, weight: Any, bias: Any, stride: Any, padding: Any, dilation: Any, groups: Any
) -> TensorProxy:
    check_operands(name, spatial, input, weight, bias, groups)
    unbatched = input.ndim == spatial + 1
    if unbatched:
        input = prims.broadcast_in_dim(input, [1, *input.shape], list(range(1, input.ndim + 1)))
    stride = per_dim(name, "stride", stride, spatial)
    dilation = per_dim(name, "dilation", dilation, spatial)
    if isinstance(padding, str):
        check(
            padding in ("valid", "same"),
            lambda: f"{name}: padding must be 'valid', 'same' or ints, got {padding!r}{called_at()}",
            ValueError,
        )
        if padding == "same":
            input, padding = _same_padding(name, input, weight, stride, dilation)
        else:
            padding = [0] * spatial
    padding = per_dim(name, "padding", padding, spatial)
    output = prims.convolution(input, weight, bias, stride, padding, dilation, groups)
    return prims.squeeze(output, (0,)) if unbatched else output


def _register(spatial: int) -> None:
    name = f"torch.conv{spatial}d"

    @register(name)
    def conv(
        input: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: Any = 1
    ) -> TensorProxy:
        return _convolution(name, spatial, input, weight, bias, stride, padding, dilation, groups)

    conv.__doc__ = f"{name}: one prims.convolution over {spatial} spatial dim(s)."


for _spatial in (1, 2, 3):
    _register(_spatial)
