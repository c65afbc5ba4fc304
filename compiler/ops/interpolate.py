"""`F.interpolate` in its `nearest`, `nearest-exact`, `linear` and `bilinear` modes:
resizing a feature map (a segmentation head's upsampling, MobileViT's patch grid, BEiT's relative
position table).

Each resized dim reads the input at source indices computed as eager's kernels compute them
(aten/src/ATen/native/UpSample.h, in float32 from the destination index): `nearest` takes
`min(floor(dst * scale), size - 1)` (`nearest-exact`: of `dst + 0.5`); the linear modes blend the
two neighbours `i0 = floor(src)` and `i1 = min(i0 + 1, size - 1)` with weights `1 - l, l` where
`l = clamp(src - i0, 0, 1)` and `src = scale * (dst + 0.5) - 0.5` (at least 0), or `scale * dst`
with `align_corners`. The modes are separable, so the 2-d forms resize one dim after the
other, each an `index_select` whose gradient is an index add. A symbolic size stays symbolic: the
output size is `floor(size * scale)` computed on it (or the size given, symbolic too), and the
source indices are computed from it as from an int.
"""

from __future__ import annotations

from typing import Any

import torch

from compiler import prims
from compiler.core import dtypes
from compiler.core.errors import called_at, check
from compiler.core.ir import NumberProxy, TensorProxy, same_size
from compiler.ops.registry import register

_NAME = "torch.nn.functional.interpolate"
# mode -> how many trailing dims it resizes (the input has two more: batch and channels)
_MODES = {"nearest": None, "nearest-exact": None, "linear": 1, "bilinear": 2}


def _compute_dtype(x: TensorProxy) -> torch.dtype:
    """eager's opmath type: float64 for float64, float32 otherwise."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def _destination(out: Any, dtype: torch.dtype, device: torch.device) -> TensorProxy:
    return prims.convert_element_type(prims.iota(out, 0, 1, torch.int64, device), dtype)


def _nearest(x: TensorProxy, dim: int, out: Any, scale: float | None, exact: bool) -> TensorProxy:
    size = x.shape[dim]
    if same_size(out, size):
        return x
    ratio = size / out if scale is None or scale <= 0 else 1.0 / scale
    # NOTE: eager's float32 product and floor (of the pixel's centre for nearest-exact), then the
    # clamp to the last index
    destination = _destination(out, torch.float32, x.device)
    source = prims.floor(prims.mul(prims.add(destination, 0.5) if exact else destination, ratio))
    index = prims.minimum(prims.convert_element_type(source, torch.int64), size - 1)
    return prims.index_select(x, dim, index)


def _linear(x: TensorProxy, dim: int, out: Any, scale: float | None, align_corners: bool) -> TensorProxy:
    size = x.shape[dim]
    if same_size(out, size):
        return x
    dtype = x.dtype
    destination = _destination(out, dtype, x.device)
    if align_corners:
        source = prims.mul(destination, (size - 1) / (out - 1) if bool(out > 1) else 0.0)
    else:
        ratio = size / out if scale is None or scale <= 0 else 1.0 / scale
        source = prims.maximum(prims.sub(prims.mul(prims.add(destination, 0.5), ratio), 0.5), 0.0)
    first = prims.convert_element_type(source, torch.int64)  # source >= 0: truncation is the floor
    second = prims.minimum(prims.add(first, 1), size - 1)
    offset = prims.sub(source, prims.convert_element_type(first, dtype))
    upper_weight = prims.minimum(prims.maximum(offset, 0.0), 1.0)
    shape = [1] * x.ndim
    shape[dim] = out
    lower, upper = (prims.index_select(x, dim, index) for index in (first, second))
    dims = list(range(x.ndim))

    def weighted(values: TensorProxy, weight: TensorProxy) -> TensorProxy:
        return prims.mul(values, prims.broadcast_in_dim(prims.reshape(weight, shape), list(values.shape), dims))

    # NOTE: eager's sum of the two weighted neighbours (x is in eager's opmath type already)
    return prims.add(weighted(lower, prims.sub(1.0, upper_weight)), weighted(upper, upper_weight))


def _output_sizes(x: TensorProxy, resized: int, size: Any, scale_factor: Any) -> tuple[list[Any], list[float | None]]:
    """(the output size of each resized dim, the scale its kernel is given: None where computed from sizes)."""
    check(
        (size is None) != (scale_factor is None),
        lambda: f"{_NAME}: exactly one of size and scale_factor must be given{called_at()}",
        ValueError,
    )
    if size is not None:
        sizes = list(size) if isinstance(size, (tuple, list)) else [size] * resized
        sizes = [_int(s) for s in sizes]
        check(
            len(sizes) == resized and all(_is_int(s) and bool(s > 0) for s in sizes),
            lambda: f"{_NAME}: size must be {resized} positive ints for a {x.ndim}-d input, got {size!r}{called_at()}",
            ValueError,
        )
        return sizes, [None] * resized
    scales = list(scale_factor) if isinstance(scale_factor, (tuple, list)) else [scale_factor] * resized
    check(
        len(scales) == resized,
        lambda: f"{_NAME}: scale_factor must be {resized} numbers, got {scale_factor!r}{called_at()}",
        ValueError,
    )
    # NOTE: eager's floor(float(size) * scale), recorded on a symbolic size (the scale is specialised)
    scales = [float(s) for s in scales]
    return [prims.floor(n * s) for n, s in zip(x.shape[2:], scales)], scales


def _is_int(value: Any) -> bool:
    return (isinstance(value, NumberProxy) and value.python_type is int) or (
        isinstance(value, int) and not isinstance(value, bool)
    )


def _int(value: Any) -> Any:
    """A size given as an int-like (a numpy int, a 0-d tensor's value) as an int; a symbolic size as itself."""
    if isinstance(value, (NumberProxy, bool)) or not hasattr(value, "__index__"):
        return value
    return int(value)


@register(_NAME)
def interpolate(
    input: TensorProxy,
    size: Any = None,
    scale_factor: Any = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
) -> TensorProxy:
    """F.interpolate (nearest, nearest-exact, linear, bilinear; see the module docstring)."""
    check(
        mode in _MODES and not antialias,
        lambda: (
            f"{_NAME}: mode={mode!r} (antialias={antialias}) is not supported; nearest, linear and bilinear "
            f"are{called_at()}"
        ),
        NotImplementedError,
    )
    check(
        isinstance(input, TensorProxy) and input.ndim >= 3 and dtypes.is_float(input.dtype),
        lambda: f"{_NAME}: expected a floating tensor of at least 3 dims (batch, channels, ...){called_at()}",
        ValueError,
    )
    resized = _MODES[mode] or input.ndim - 2
    check(
        input.ndim - 2 == resized,
        lambda: f"{_NAME}: mode={mode!r} resizes {resized} dims; the input has {input.ndim - 2}{called_at()}",
        ValueError,
    )
    check(
        not mode.startswith("nearest") or align_corners is None,
        lambda: f"{_NAME}: align_corners only applies to the linear modes{called_at()}",
        ValueError,
    )
    outs, scales = _output_sizes(input, resized, size, scale_factor)
    if recompute_scale_factor:
        scales = [None] * resized
    # NOTE: the linear modes blend in eager's opmath type, rounding to the input's dtype once at the end
    nearest = mode.startswith("nearest")
    dtype = input.dtype if nearest else _compute_dtype(input)
    result = input if dtype == input.dtype else prims.convert_element_type(input, dtype)
    for offset, (out, scale) in enumerate(zip(outs, scales)):
        dim = 2 + offset
        if nearest:
            result = _nearest(result, dim, out, scale, exact=mode == "nearest-exact")
        else:
            result = _linear(result, dim, out, scale, bool(align_corners))
    return result if result.dtype == input.dtype else prims.convert_element_type(result, input.dtype)
