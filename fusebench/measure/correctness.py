"""Checking a variant's result against the reference before any time is recorded.

Results are trees (tuples, lists, dicts) of tensors and Python numbers. Two trees agree when
they have the same structure, every tensor has the expected shape, and every element satisfies
|actual - expected| <= atol + rtol * |expected|, with (rtol, atol) chosen by the actual tensor's
dtype (the reference usually runs in float64, so its own error is negligible). NaN agrees only
with NaN. The first disagreement is reported with its location and the largest error.

`rows_may_differ` (a case's `Case.rows_may_differ`) relaxes this for a model that makes discrete
choices from computed values: up to that fraction of the rows of a tensor of two or more
dimensions (its slices along the last dimension, rounded up to whole rows) may disagree as a
whole, each still finite, while every other row agrees element by element.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from fusebench.errors import CaseError, check
from fusebench.measure.snapshot import iter_leaves

Tolerance = Callable[[torch.dtype], tuple[float, float]]


@dataclass(frozen=True)
class Mismatch:
    """Where a result disagreed with the reference, and by how much."""

    where: str
    max_abs_error: float
    message: str

    def __str__(self) -> str:
        return self.message


def compare(
    expected: Any, actual: Any, tolerance: Tolerance, label: str = "output", rows_may_differ: float = 0.0
) -> Mismatch | None:
    """The first disagreement between `actual` and `expected` (trees), or None when they agree;
    `rows_may_differ`: the fraction of each tensor's rows allowed to disagree (see the module's
    docstring)."""
    check(
        0.0 <= rows_may_differ < 1.0,
        lambda: f"rows_may_differ is {rows_may_differ!r}; expected a fraction in [0, 1)",
        CaseError,
    )
    expected_leaves = list(iter_leaves(expected, label))
    actual_leaves = list(iter_leaves(actual, label))
    expected_paths = [path for path, _ in expected_leaves]
    actual_paths = [path for path, _ in actual_leaves]
    if expected_paths != actual_paths:
        return Mismatch(
            label,
            float("inf"),
            f"{label} has structure {_describe(actual)} but the reference returned {_describe(expected)}",
        )
    for (path, want), (_, got) in zip(expected_leaves, actual_leaves):
        mismatch = _compare_leaf(path, want, got, tolerance, rows_may_differ)
        if mismatch is not None:
            return mismatch
    return None


def _compare_leaf(path: str, want: Any, got: Any, tolerance: Tolerance, rows_may_differ: float) -> Mismatch | None:
    if isinstance(want, torch.Tensor) or isinstance(got, torch.Tensor):
        if not (isinstance(want, torch.Tensor) and isinstance(got, torch.Tensor)):
            return Mismatch(
                path,
                float("inf"),
                f"{path} is {type(got).__name__} but the reference gave {type(want).__name__}",
            )
        return _compare_tensors(path, want.detach(), got.detach(), tolerance, rows_may_differ)
    if isinstance(want, (int, float)) and isinstance(got, (int, float)) and not isinstance(want, bool):
        return _compare_tensors(path, torch.tensor(float(want)), torch.tensor(float(got)), tolerance, 0.0)
    if want != got:
        return Mismatch(path, float("inf"), f"{path} is {got!r} but the reference gave {want!r}")
    return None


def _compare_tensors(
    path: str, want: torch.Tensor, got: torch.Tensor, tolerance: Tolerance, rows_may_differ: float
) -> Mismatch | None:
    if tuple(want.shape) != tuple(got.shape):
        return Mismatch(
            path, float("inf"), f"{path} has shape {tuple(got.shape)} but the reference has {tuple(want.shape)}"
        )
    if want.numel() == 0:
        return None
    rtol, atol = tolerance(got.dtype)
    compute = torch.float64 if (want.is_floating_point() or got.is_floating_point()) else torch.int64
    # NOTE: compared where the result lives (a GPU compares a vocabulary-sized output in
    # milliseconds, one CPU thread in seconds), a slice at a time so the float64 copies stay small
    where = got.device if got.device.type == "cuda" else torch.device("cpu")
    want_flat, got_flat = want.reshape(-1), got.reshape(-1)
    row = want.shape[-1] if want.dim() >= 1 else 1
    step = max(CHUNK_ELEMENTS // row, 1) * row  # whole rows per slice
    bad_count, bad_rows, worst, worst_at = 0, 0, -1.0, -1
    for start in range(0, want_flat.numel(), step):
        piece = slice(start, start + step)
        error, bad = _errors(want_flat[piece], got_flat[piece], atol, rtol, compute, where)
        count = int(bad.sum())
        if count:
            bad_count += count
            bad_rows += int(bad.reshape(-1, row).any(-1).sum())
            masked = torch.where(bad, error, torch.full_like(error, -1.0))
            at = int(torch.argmax(masked))
            if float(masked[at]) > worst:
                worst, worst_at = float(masked[at]), start + at
    if bad_count == 0:
        return None
    rows = want.numel() // row
    allowed_rows = math.ceil(rows_may_differ * rows) if want.dim() >= 2 else 0
    if bad_rows <= allowed_rows and math.isfinite(worst):
        return None
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst_at), want.shape))
    excuse = (
        f"; {bad_rows} of {rows} rows disagree, more than the {allowed_rows} the case allows" if allowed_rows else ""
    )
    return Mismatch(
        path,
        worst,
        f"{path}: max abs error {worst:.3g} at index {index} (expected {float(want[index]):.6g}, "
        f"got {float(got[index]):.6g}); {bad_count} of {want.numel()} elements exceed "
        f"atol {atol:g} + rtol {rtol:g} * |expected| for {_dtype_name(got.dtype)}{excuse}",
    )


CHUNK_ELEMENTS = 1 << 24


def _errors(
    want: torch.Tensor, got: torch.Tensor, atol: float, rtol: float, compute: torch.dtype, where: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """(|got - want|, where it exceeds atol + rtol * |want|) of one slice; NaN is bad unless the
    reference is NaN there too, and a bad NaN's error reads inf."""
    want_c = want.to(device=where, dtype=compute)
    got_c = got.to(device=where, dtype=compute)
    error = (got_c - want_c).abs()
    bad = ~(error <= atol + rtol * want_c.abs())  # NOTE: NaN errors compare False, so NaN counts as bad ...
    if compute == torch.float64:
        both_nan = torch.isnan(want_c) & torch.isnan(got_c)
        bad &= ~both_nan  # ... unless the reference is NaN there too.
        error = torch.nan_to_num(torch.where(both_nan, torch.zeros_like(error), error), nan=float("inf"))
    return error, bad


def _describe(value: Any) -> str:
    leaves = list(iter_leaves(value))
    if len(leaves) == 1 and leaves[0][0] == "":
        return type(value).__name__
    return f"{len(leaves)} leaves {[path for path, _ in leaves][:4]}{'...' if len(leaves) > 4 else ''}"


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
