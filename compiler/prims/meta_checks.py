"""Checks shared by the meta functions: operands of one shape, dtype and device (prims neither
broadcast nor promote)."""

from __future__ import annotations

import builtins

from compiler.core.errors import check
from compiler.core.ir import TensorProxy, same_size
from compiler.prims.prim import Prim


def check_same_shape(prim: Prim, tensors: list[TensorProxy], same_dtype: bool = True) -> None:
    """Raises unless every tensor has the first's shape, device and (with `same_dtype`) dtype."""
    first = tensors[0]
    for t in tensors[1:]:
        check(
            len(t.shape) == len(first.shape) and builtins.all(map(same_size, t.shape, first.shape)),
            lambda t=t: (
                f"prims.{prim.value}: {first.name} has shape {first.shape} but {t.name} has "
                f"shape {t.shape}; prims do not broadcast"
            ),
            ValueError,
        )
        check(
            not same_dtype or t.dtype == first.dtype,
            lambda t=t: (
                f"prims.{prim.value}: {first.name} is {first.dtype} but {t.name} is "
                f"{t.dtype}; prims do not promote types"
            ),
            TypeError,
        )
        check(
            t.device == first.device,
            lambda t=t: f"prims.{prim.value}: {first.name} is on {first.device} but {t.name} is on {t.device}",
            ValueError,
        )
