"""Meta functions of the prims torch runs with library kernels: convolution, its backward and the
transposed convolution (cuDNN), grouped_mm (a mixture of experts' GEMMs). `meta.META` includes `LIBRARY_META`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from compiler.core.errors import check
from compiler.core.ir import TensorProxy, same_size
from compiler.prims.prim import Prim


def _check_ranks(
    name: str, a: TensorProxy, weight: TensorProxy, stride: Any, padding: Any, dilation: Any, weight_layout: str
) -> int:
    """Checks a convolution's geometry lists, ranks and dtypes (`weight_layout` names the weight's
    dims for the message); returns the number of spatial dims."""
    spatial = len(stride)
    check(
        spatial >= 1 and len(padding) == spatial and len(dilation) == spatial,
        lambda: f"{name}: stride {stride}, padding {padding} and dilation {dilation} need one entry per spatial dim",
        ValueError,
    )
    check(
        a.ndim == spatial + 2 and weight.ndim == spatial + 2,
        lambda: (
            f"{name}: {a.name} {a.type_string()} and weight {weight.name} {weight.type_string()} need rank "
            f"{spatial + 2} ([batch, channels, *spatial] and {weight_layout})"
        ),
        ValueError,
    )
    check(
        a.dtype == weight.dtype,
        lambda: f"{name}: {a.name} is {a.dtype} but weight {weight.name} is {weight.dtype}",
        TypeError,
    )
    return spatial


def _check_geometry(
    name: str, a: TensorProxy, weight: TensorProxy, stride: Any, padding: Any, dilation: Any, groups: int
) -> int:
    """Checks convolution's operands against each other; returns the number of spatial dims."""
    spatial = _check_ranks(name, a, weight, stride, padding, dilation, "[out, channels // groups, *kernel]")
    check(
        isinstance(groups, int) and groups >= 1 and same_size(a.shape[1], weight.shape[1] * groups),
        lambda: (
            f"{name}: {a.name} has {a.shape[1]} channels, "
            f"weight {weight.name} expects {weight.shape[1]} x {groups} groups"
        ),
        ValueError,
    )
    return spatial


def output_sizes(a: TensorProxy, weight: TensorProxy, stride: Any, padding: Any, dilation: Any) -> list[Any]:
    """The spatial sizes of convolution's output: (size + 2 pad - dilation (kernel - 1) - 1) // stride + 1."""
    spatial = len(stride)
    sizes = []
    for i in range(spatial):
        size, kernel = a.shape[2 + i], weight.shape[2 + i]
        sizes.append((size + 2 * padding[i] - dilation[i] * (kernel - 1) - 1) // stride[i] + 1)
    return sizes


def _convolution_meta(
    a: TensorProxy, weight: TensorProxy, bias: Any, stride: Any, padding: Any, dilation: Any, groups: int
) -> TensorProxy:
    _check_geometry("prims.convolution", a, weight, stride, padding, dilation, groups)
    check(
        bias is None or (bias.ndim == 1 and same_size(bias.shape[0], weight.shape[0]) and bias.dtype == a.dtype),
        lambda: f"prims.convolution: bias must be None or a {a.dtype} vector of {weight.shape[0]} entries",
        ValueError,
    )
    sizes = output_sizes(a, weight, stride, padding, dilation)
    check(
        all(not isinstance(s, int) or s >= 1 for s in sizes),
        lambda: (
            f"prims.convolution: {a.name} {a.type_string()} is smaller than the (dilated) kernel "
            f"{list(weight.shape[2:])}"
        ),
        RuntimeError,  # NOTE: eager's error type: a program that tries sizes catches it
    )
    return TensorProxy((a.shape[0], weight.shape[0], *sizes), a.dtype, a.device)


def _convolution_backward_meta(
    grad: TensorProxy,
    a: TensorProxy,
    weight: TensorProxy,
    stride: Any,
    padding: Any,
    dilation: Any,
    groups: int,
    output_mask: Any,
) -> tuple[TensorProxy, ...]:
    _check_geometry("prims.convolution_backward", a, weight, stride, padding, dilation, groups)
    expected = [a.shape[0], weight.shape[0], *output_sizes(a, weight, stride, padding, dilation)]
    check(
        grad.ndim == len(expected) and all(same_size(g, e) for g, e in zip(grad.shape, expected)),
        lambda: (
            f"prims.convolution_backward: grad {grad.name} {grad.type_string()} is not the output's shape {expected}"
        ),
        ValueError,
    )
    check(
        len(output_mask) == 3 and any(output_mask),
        lambda: f"prims.convolution_backward: output_mask {output_mask} needs three bools, one of them True",
        ValueError,
    )
    shapes = (a.shape, weight.shape, (weight.shape[0],))
    return tuple(TensorProxy(shape, a.dtype, a.device) for shape, wanted in zip(shapes, output_mask) if wanted)


def _convolution_transpose_meta(
    a: TensorProxy,
    weight: TensorProxy,
    bias: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    groups: int,
    output_padding: Any,
) -> TensorProxy:
    name = "prims.convolution_transpose"
    spatial = _check_ranks(name, a, weight, stride, padding, dilation, "[in, out // groups, *kernel]")
    check(
        len(output_padding) == spatial and all(0 <= o < max(s, d) for o, s, d in zip(output_padding, stride, dilation)),
        lambda: f"{name}: output_padding {output_padding} needs one entry per dim below max(stride, dilation)",
        ValueError,
    )
    # NOTE: the weight [in, out // groups, *kernel] read as a convolution's [out, in // groups] from the output
    out_channels = weight.shape[1] * groups
    check(
        isinstance(groups, int) and groups >= 1 and same_size(a.shape[1], weight.shape[0]),
        lambda: f"{name}: {a.name} has {a.shape[1]} channels, weight {weight.name} expects {weight.shape[0]}",
        ValueError,
    )
    check(
        bias is None or (bias.dtype == a.dtype and bias.ndim == 1),
        lambda: f"{name}: {a.name}, weight and bias must share a dtype (bias a vector)",
        TypeError,
    )
    check(
        bias is None or same_size(bias.shape[0], out_channels),
        lambda: f"{name}: bias must have {out_channels} entries",
        ValueError,
    )
    sizes = [
        (a.shape[2 + i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (weight.shape[2 + i] - 1) + 1
        + output_padding[i]
        for i in range(spatial)
    ]  # fmt: skip
    check(
        all(not isinstance(s, int) or s >= 1 for s in sizes),
        lambda: f"{name}: an output of sizes {sizes}: the padding {list(padding)} is too large",
        ValueError,
    )
    return TensorProxy((a.shape[0], out_channels, *sizes), a.dtype, a.device)


def _grouped_mm_meta(a: TensorProxy, b: TensorProxy, offs: TensorProxy) -> TensorProxy:
    check(
        a.dtype == b.dtype and a.ndim == 2 and b.ndim in (2, 3),
        lambda: (
            f"prims.grouped_mm: {a.name} {a.type_string()} and {b.name} {b.type_string()} must share a dtype, "
            "a 2-d and b 2-d or 3-d"
        ),
        TypeError,
    )
    check(
        offs.ndim == 1 and offs.dtype == torch.int32 and (b.ndim == 2 or same_size(offs.shape[0], b.shape[0])),
        lambda: f"prims.grouped_mm: offs {offs.name} {offs.type_string()} must be int32 offsets, one per group",
        TypeError,
    )
    check(
        same_size(a.shape[1], b.shape[-2]),
        lambda: f"prims.grouped_mm: {a.name} {a.shape} @ {b.name} {b.shape}: inner sizes differ",
        ValueError,
    )
    if b.ndim == 3:
        return TensorProxy((a.shape[0], b.shape[2]), a.dtype, a.device)
    return TensorProxy((offs.shape[0], a.shape[0], b.shape[1]), a.dtype, a.device)


LIBRARY_META: dict[Prim, Callable] = {
    Prim.CONVOLUTION: _convolution_meta,
    Prim.CONVOLUTION_BACKWARD: _convolution_backward_meta,
    Prim.CONVOLUTION_TRANSPOSE: _convolution_transpose_meta,
    Prim.GROUPED_MM: _grouped_mm_meta,
}
