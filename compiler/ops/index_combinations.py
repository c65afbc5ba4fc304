"""Enumerations of index combinations: tril_indices, triu_indices and cartesian_prod.

The triangle's coordinates are constants, built from iotas in a fixed number of ops whatever the
size: the rows holding an element are consecutive, so with each row's element count and first
column (iota arithmetic) the row of the k-th element is a running count of the row starts reached
(`index_add` of ones at the starts, `cumsum`), and its column the offset from its row's start.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from compiler import prims
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy, canonical_device
from compiler.ops.factory import _check_factory_kwargs
from compiler.ops.registry import register


def _row_lengths(rows: int, cols: int, offset: int, upper: bool) -> list[int]:
    """How many elements of each row lie in the triangle (on or above / below the `offset` diagonal)."""
    if upper:
        return [cols - min(max(r + offset, 0), cols) for r in range(rows)]
    return [min(max(r + offset + 1, 0), cols) for r in range(rows)]


def triangle_indices(rows: int, cols: int, offset: int, upper: bool, device: Any) -> TensorProxy:
    """The [2, count] int64 coordinates of a rows x cols matrix's upper (`upper`) or lower triangle
    from the `offset` diagonal on, row by row: what torch.triu_indices / tril_indices return."""
    lengths = _row_lengths(rows, cols, offset, upper)
    count = sum(lengths)
    if count == 0:
        return prims.full([2, 0], 0, torch.int64, device)
    filled = [r for r, n in enumerate(lengths) if n > 0]
    first_row, row_count = filled[0], len(filled)
    row = prims.iota(row_count, first_row, 1, torch.int64, device)
    first_col = (row + offset).clamp(0, cols) if upper else row * 0
    length = cols - first_col if upper else (row + offset + 1).clamp(0, cols)
    start = length.cumsum(0) - length
    k = prims.iota(count, 0, 1, torch.int64, device)
    row_starts = k.new_zeros(count).index_add(0, start[1:], k.new_ones(row_count - 1))
    local_row = row_starts.cumsum(0)
    col = k - start[local_row] + first_col[local_row]
    return torch.stack([local_row + first_row, col])


def _triangle_op(name: str, upper: bool) -> None:
    @register(f"torch.{name}")
    def op(
        row: int,
        col: int,
        offset: int = 0,
        *,
        dtype: torch.dtype | None = None,
        device: Any = None,
        layout: Any = None,
        pin_memory: bool = False,
    ) -> TensorProxy:
        _check_factory_kwargs(f"torch.{name}", None, layout, pin_memory)
        check(
            isinstance(row, int) and isinstance(col, int) and row >= 0 and col >= 0,
            lambda: f"torch.{name}: row and col must be non-negative ints, got {row!r} and {col!r}{called_at()}",
            RuntimeError,
        )
        dtype = torch.int64 if dtype is None else dtype
        check(
            dtype in (torch.int32, torch.int64),
            lambda: f"torch.{name}: dtype must be torch.int32 or torch.int64, got {dtype}{called_at()}",
            RuntimeError,
        )
        return triangle_indices(row, col, offset, upper, canonical_device(device)).to(dtype)

    op.__name__ = name
    op.__doc__ = f"torch.{name}: the coordinates of the {'upper' if upper else 'lower'} triangle, as [2, count]."


_triangle_op("tril_indices", upper=False)
_triangle_op("triu_indices", upper=True)


@register("torch.cartesian_prod")
def cartesian_prod(*tensors: TensorProxy) -> TensorProxy:
    """Every combination of one element of each 1-D tensor, as rows (the last tensor varying
    fastest); a single tensor is returned as it is, as eager does."""
    check(
        all(isinstance(t, TensorProxy) and t.ndim == 1 for t in tensors) and len(tensors) > 0,
        lambda: f"torch.cartesian_prod: expected 1-D tensors, got {_shapes(tensors)}{called_at()}",
        RuntimeError,
    )
    if len(tensors) == 1:
        return tensors[0]
    grids = torch.meshgrid(*tensors, indexing="ij")
    return torch.stack([g.flatten() for g in grids], dim=1)


def _shapes(tensors: Sequence[Any]) -> list:
    return [tuple(t.shape) if isinstance(t, TensorProxy) else type(t).__name__ for t in tensors]
