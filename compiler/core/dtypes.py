"""Dtype facts the ops layer needs: short names, categories, torch's type promotion, compute dtypes.

Prims never promote; the ops layer calls `promote` and `compute_dtype` and inserts explicit
conversions, following torch's rules: a dimensioned tensor outranks a zero-dim tensor, which
outranks a Python number, unless the lower-ranked operand belongs to a higher category
(bool < integer < floating < complex).
"""

from __future__ import annotations

import torch

SHORT_NAMES = {
    torch.bool: "b8",
    torch.uint8: "u8",
    torch.int8: "i8",
    torch.int16: "i16",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.float32: "f32",
    torch.float64: "f64",
    torch.complex64: "c64",
    torch.complex128: "c128",
}

# The dtype holding every value of a Python number type (a number read as a tensor: nvFuser's
# scalars, a device scalar)
NUMBER_DTYPES: dict[type, torch.dtype] = {bool: torch.bool, int: torch.int64, float: torch.float64}

# Lower-precision floats are computed in float32 (torch's "opmath" type) and rounded once.
_COMPUTE = {torch.float16: torch.float32, torch.bfloat16: torch.float32}


def short_name(dtype: torch.dtype | type) -> str:
    """'f32' for torch.float32, 'int' for the Python type int."""
    if isinstance(dtype, type):
        return dtype.__name__
    return SHORT_NAMES.get(dtype, str(dtype).removeprefix("torch."))


def category(dtype: torch.dtype | type) -> int:
    """0 bool, 1 integer, 2 floating, 3 complex; for torch dtypes and the Python number types."""
    if dtype is bool or dtype is torch.bool:
        return 0
    if dtype is int:
        return 1
    if dtype is float:
        return 2
    if dtype is complex:
        return 3
    if dtype.is_complex:
        return 3
    if dtype.is_floating_point:
        return 2
    return 1


def is_float(dtype: torch.dtype) -> bool:
    """True for floating-point torch dtypes."""
    return isinstance(dtype, torch.dtype) and dtype.is_floating_point


def is_integer(dtype: torch.dtype) -> bool:
    """True for integer torch dtypes (not bool)."""
    return isinstance(dtype, torch.dtype) and category(dtype) == 1


def default_dtype(category_: int) -> torch.dtype:
    """The dtype torch gives a Python number of this category when it sets the result type."""
    return (torch.bool, torch.int64, torch.get_default_dtype(), torch.complex64)[category_]


def python_type(dtype: torch.dtype) -> type:
    """The Python number type holding values of `dtype`."""
    return (bool, int, float, complex)[category(dtype)]


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype elementwise math runs in for results of `dtype` (float32 for bf16/f16)."""
    return _COMPUTE.get(dtype, dtype)


def promote(dimensioned: list[torch.dtype], zero_dim: list[torch.dtype], numbers: list[type]) -> torch.dtype:
    """torch's result type for operands grouped by rank class (`torch.result_type` generalised)."""
    result = None
    for group in (dimensioned, zero_dim):
        group_dtype = None
        for dtype in group:
            group_dtype = dtype if group_dtype is None else torch.promote_types(group_dtype, dtype)
        if group_dtype is not None and (result is None or category(group_dtype) > category(result)):
            result = group_dtype
    if numbers:
        top = max(category(t) for t in numbers)
        if result is None or top > category(result):
            if result is not None and top == 3 and category(result) == 2:
                return torch.complex128 if result == torch.float64 else torch.complex64
            return default_dtype(top)
    assert result is not None, "promote() needs at least one operand"
    return result
