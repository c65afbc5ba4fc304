"""`F.affine_grid` and `F.grid_sample` (2-D and 3-D; modes bilinear, nearest and bicubic (2-D, as
eager); padding modes zeros, border and reflection), written as calls of other torch ops on the proxies.

affine_grid: the output's normalised coordinates (x along the last dim, then y, then z), with a
1 appended, times theta transposed: a batched matmul, as eager computes it, so theta's gradient
is the matmul's. grid_sample: each grid point's normalised coordinates become source positions
(unnormalised by `align_corners`, then clipped or reflected by the padding mode as eager's
`grid_sampler_compute_source_index` does); bilinear reads the 2 (4, 8) neighbouring elements with
`gather` and weights them by the fractional parts, nearest reads the position rounded half to
even. A neighbour outside the input counts zero. The gradients of input (gather's: an add back
into the input) and of grid (through the weights, the clipping and the reflection) follow from the
ops. Positions and weights are computed in the grid's dtype, as eager's kernel does (in bf16 a
position rounds there, which picks the nearest element); bf16/f16 values are weighted and summed
in float32 and rounded once. Bicubic follows eager's kernel: the unpadded position's 4 x 4
neighbours, each index clipped or reflected by the padding mode, weighted by the cubic convolution
(A = -0.75) of the fractional parts, along x for each row and then along y, every step in the
input's dtype as eager computes it (bf16 rounding each one).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import torch

from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy
from compiler.ops.registry import dispatch, register


def _base_coordinates(steps: int, align_corners: bool, like: TensorProxy) -> Any:
    """eager's normalised coordinates of `steps` positions along one dim (0 for a single one)."""
    # NOTE: factories are called through `dispatch`: no proxy among their arguments to route them
    if steps <= 1:
        return dispatch(torch.zeros, (1,), {"dtype": like.dtype, "device": like.device})
    coordinates = dispatch(torch.linspace, (-1, 1, steps), {"dtype": like.dtype, "device": like.device})
    return coordinates if align_corners else coordinates * ((steps - 1) / steps)


@register("torch.nn.functional.affine_grid")
def affine_grid(theta: TensorProxy, size: Any, align_corners: bool | None = None) -> Any:
    """The sampling grid [N, (D,) H, W, 2 or 3] of the affine maps `theta` [N, 2, 3] or [N, 3, 4]."""
    check(
        isinstance(theta, TensorProxy) and theta.dtype.is_floating_point,
        lambda: f"F.affine_grid: theta must be a float tensor, got {theta!r}{called_at()}",
        TypeError,
    )
    sizes = [int(s) for s in size]
    spatial = len(sizes) - 2
    check(
        spatial in (2, 3) and tuple(theta.shape) == (sizes[0], spatial, spatial + 1),
        lambda: (
            f"F.affine_grid: expected theta of shape [{sizes[0]}, k, k + 1] for a size of 4 (k = 2) or 5 (k = 3) "
            f"entries, got theta {tuple(theta.shape)} and size {sizes}{called_at()}"
        ),
        ValueError,
    )
    align = bool(align_corners)
    extents = sizes[2:]  # (D,) H, W
    columns = []
    for d in range(spatial):  # x (along W), y (along H), z (along D)
        axis = spatial - 1 - d
        shape = [1] * spatial
        shape[axis] = extents[axis]
        columns.append(_base_coordinates(extents[axis], align, theta).reshape(shape).expand(extents))
    columns.append(dispatch(torch.ones, (extents,), {"dtype": theta.dtype, "device": theta.device}))
    base = torch.stack(columns, -1).reshape(1, math.prod(extents), spatial + 1).expand(sizes[0], -1, -1)
    return torch.bmm(base, theta.transpose(1, 2)).reshape(sizes[0], *extents, spatial)


def _reflect(coordinate: Any, twice_low: int, twice_high: int) -> Any:
    """`coordinate` reflected into [twice_low / 2, twice_high / 2] off its ends, as eager reflects."""
    if twice_low == twice_high:
        return coordinate * 0
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    distance = (coordinate - low).abs()
    extra = torch.fmod(distance, span)
    flips = torch.floor(distance / span)
    return torch.where(torch.fmod(flips, 2) == 0, extra + low, span - extra + low)


def _unnormalised(coordinate: Any, size: int, align_corners: bool) -> Any:
    """The input position of a normalised grid coordinate in [-1, 1] along a dim of `size`."""
    if align_corners:
        return (coordinate + 1) / 2 * (size - 1)
    return ((coordinate + 1) * size - 1) / 2


def _padded(position: Any, size: int, padding_mode: str, align_corners: bool) -> Any:
    """`position` clipped or reflected into the input by the padding mode (zeros: unchanged)."""
    if padding_mode == "reflection":
        position = _reflect(position, 0, 2 * (size - 1)) if align_corners else _reflect(position, -1, 2 * size - 1)
    if padding_mode in ("border", "reflection"):
        position = position.clamp(0, size - 1)
    return position


def _source_position(coordinate: Any, size: int, padding_mode: str, align_corners: bool) -> Any:
    """The input position a normalised grid coordinate samples along a dim of `size`, padded."""
    return _padded(_unnormalised(coordinate, size, align_corners), size, padding_mode, align_corners)


def _read(flat: Any, indices: list[Any], sizes: list[int], weight: Any) -> Any:
    """`weight` times the input's elements at the integer `indices` (one tensor per spatial dim, of
    the grid's shape [N, *out]), zero where an index falls outside the input: [N, C, *out]."""
    inside = None
    linear = None
    for index, size in zip(indices, sizes):
        within = (index >= 0) & (index < size)
        inside = within if inside is None else inside & within
        clamped = index.clamp(0, size - 1)
        linear = clamped if linear is None else linear * size + clamped
    batch, channels = flat.shape[0], flat.shape[1]
    out = list(indices[0].shape[1:])
    positions = linear.reshape(batch, 1, -1).expand(batch, channels, -1)
    values = torch.gather(flat, 2, positions).reshape(batch, channels, *out)
    return values * torch.where(inside, weight, 0.0).unsqueeze(1)


@register("torch.nn.functional.grid_sample")
def grid_sample(
    input: TensorProxy,
    grid: TensorProxy,
    mode: str = "bilinear",
    padding_mode: str = "zeros",
    align_corners: bool | None = None,
) -> Any:
    """`input` [N, C, (D,) H, W] sampled at the normalised positions of `grid` [N, (Do,) Ho, Wo, 2 or 3]."""
    check(
        isinstance(input, TensorProxy) and isinstance(grid, TensorProxy) and input.ndim in (4, 5),
        lambda: f"F.grid_sample: expected a 4-d or 5-d input and a grid tensor{called_at()}",
        ValueError,
    )
    spatial = input.ndim - 2
    check(
        grid.ndim == input.ndim and grid.shape[-1] == spatial and grid.shape[0] == input.shape[0],
        lambda: (
            f"F.grid_sample: grid {tuple(grid.shape)} must be [N, *out, {spatial}] for input {tuple(input.shape)}"
            + called_at()
        ),
        ValueError,
    )
    check(
        grid.dtype == input.dtype and input.dtype.is_floating_point,
        lambda: f"F.grid_sample: input and grid must share a float dtype{called_at()}",
        TypeError,
    )
    check(
        mode in ("bilinear", "nearest", "bicubic"),
        lambda: f"F.grid_sample: mode must be 'bilinear', 'nearest' or 'bicubic', got {mode!r}{called_at()}",
        ValueError,
    )
    check(
        mode != "bicubic" or spatial == 2,
        lambda: f"F.grid_sample: bicubic interpolation only supports 4-d input, got {input.ndim}-d{called_at()}",
        RuntimeError,
    )
    check(
        padding_mode in ("zeros", "border", "reflection"),
        lambda: (
            f"F.grid_sample: padding_mode must be 'zeros', 'border' or 'reflection', got {padding_mode!r}" + called_at()
        ),
        ValueError,
    )
    dtype = input.dtype
    compute = torch.float32 if dtype in (torch.bfloat16, torch.float16) else dtype
    x, g = input.to(compute), grid
    sizes = [int(s) for s in input.shape[2:]]
    flat = x.reshape(x.shape[0], x.shape[1], -1)
    align = bool(align_corners)
    # NOTE: the grid's last entry lists x (the input's last dim) first
    coordinates = [g[..., spatial - 1 - d] for d in range(spatial)]
    if mode == "bicubic":
        values = input.reshape(input.shape[0], input.shape[1], -1)
        return _bicubic(values, coordinates, sizes, padding_mode, align)
    positions = [_source_position(c, size, padding_mode, align) for c, size in zip(coordinates, sizes)]
    if mode == "nearest":
        indices = [p.round().long() for p in positions]
        return _read(flat, indices, sizes, torch.ones_like(positions[0])).to(dtype)
    lows = [p.floor() for p in positions]
    fractions = [p - low for p, low in zip(positions, lows)]
    result = None
    for corner in itertools.product((0, 1), repeat=spatial):
        weight = None
        for bit, fraction in zip(corner, fractions):
            factor = fraction if bit else 1 - fraction
            weight = factor if weight is None else weight * factor
        indices = [(low + bit).long() for bit, low in zip(corner, lows)]
        term = _read(flat, indices, sizes, weight)
        result = term if result is None else result + term
    return result.to(dtype)


def _cubic_weights(t: Any) -> list[Any]:
    """eager's cubic convolution weights (A = -0.75) of the neighbours at offsets -1, 0, 1, 2 from
    the position's floor, `t` its fractional part, each step in `t`'s dtype and order as eager's
    `get_cubic_upsample_coefficients` (in bfloat16 every step rounds)."""
    a = -0.75
    near = lambda d: ((a + 2) * d - (a + 3)) * d * d + 1  # |offset| <= 1
    far = lambda d: ((a * d - 5 * a) * d + 8 * a) * d - 4 * a  # 1 < |offset| < 2
    opposite = 1 - t
    return [far(t + 1), near(t), near(opposite), far(opposite + 1)]


def _cubic(values: list[Any], t: Any) -> Any:
    """The 4 `values` at offsets -1..2 interpolated at fraction `t`, summed in eager's order."""
    weights = _cubic_weights(t)
    total = values[0] * weights[0]
    for value, weight in zip(values[1:], weights[1:]):
        total = total + value * weight
    return total


def _bicubic(flat: Any, coordinates: list[Any], sizes: list[int], padding_mode: str, align: bool) -> Any:
    """Bicubic sampling as eager's: the unpadded position's 4 x 4 neighbours, each index padded by the
    padding mode (then truncated, as eager's kernel casts it), out-of-input ones zero, interpolated
    along x for each of the 4 rows, then along y, in the input's dtype (eager's kernel computes
    bfloat16 and float16 in them, rounding each step)."""
    positions = [_unnormalised(c, size, align) for c, size in zip(coordinates, sizes)]
    lows = [p.floor() for p in positions]
    fractions = [(p - low).unsqueeze(1).to(flat.dtype) for p, low in zip(positions, lows)]
    indices = [
        [_padded(low + (offset - 1), size, padding_mode, align).long() for offset in range(4)]
        for low, size in zip(lows, sizes)
    ]
    ones = torch.ones_like(coordinates[0], dtype=flat.dtype)
    rows = [
        _cubic([_read(flat, [row, column], sizes, ones) for column in indices[1]], fractions[1]) for row in indices[0]
    ]
    return _cubic(rows, fractions[0])
