"""Sizes that are products of symbolic sizes, divided exactly.

A reshape infers its -1 by dividing the tensor's element count by the other sizes. With symbolic
sizes, a plain division records `(b * s * 16) // 16`: a new size the trace cannot tell equal to
`b * s`, so the next reshape's -1 (`view(b, s, -1)` of a `[b * s, 32]` projection) becomes
`(i * 32) // (b * s)` instead of 32, and whatever reads it (a chunk's pieces, their gradient's
concatenation) works with sizes it cannot compare. Here a size is read back as an integer
coefficient times symbolic factors, through the `mul` and exact `floor_divide` prims that made
it (the tracing context's `producers`), and the quotient cancels common factors, so it is the
very size proxy (or int) it stands for where it can be.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from compiler.core.context import current
from compiler.core.ir import NumberProxy, size_product
from compiler.prims import Prim


def _cancelled(numerator: list[Any], denominator: list[Any]) -> list[Any] | None:
    """`numerator` without one occurrence of each of `denominator` (same proxy); None if one is missing."""
    remaining = list(numerator)
    for factor in denominator:
        at = next((i for i, f in enumerate(remaining) if f is factor), None)
        if at is None:
            return None
        del remaining[at]
    return remaining


def factors(size: Any) -> tuple[int, list[NumberProxy]]:
    """`size` as (integer coefficient, symbolic factors) through the products and exact quotients
    that made it; a size made otherwise is a factor of its own."""
    if type(size) is int:
        return size, []
    context = current()
    bsym = context.producers.get(id(size)) if context is not None else None
    if bsym is None or len(bsym.args) != 2 or not all(type(a) is int or isinstance(a, NumberProxy) for a in bsym.args):
        return 1, [size]
    if bsym.sym is Prim.MUL:
        (ca, fa), (cb, fb) = factors(bsym.args[0]), factors(bsym.args[1])
        return ca * cb, fa + fb
    if bsym.sym is Prim.FLOOR_DIVIDE:
        quotient = exact_quotient(factors(bsym.args[0]), factors(bsym.args[1]))
        if quotient is not None:
            return quotient
    return 1, [size]


def exact_quotient(
    numerator: tuple[int, list[Any]], denominator: tuple[int, list[Any]]
) -> tuple[int, list[Any]] | None:
    """numerator / denominator where every factor of the denominator cancels; else None."""
    (cn, fn), (cd, fd) = numerator, denominator
    remaining = _cancelled(fn, fd)
    if remaining is None or cd == 0 or cn % cd != 0:
        return None
    return cn // cd, remaining


def quotient_of_products(numerator: Iterable[Any], denominator: Iterable[Any]) -> Any:
    """prod(numerator) // prod(denominator), with common factors cancelled where they all do (no
    prim recorded for a size that is already one), else the recorded division."""
    numerator, denominator = list(numerator), list(denominator)
    total_n, total_d = (1, []), (1, [])
    for size in numerator:
        c, f = factors(size)
        total_n = (total_n[0] * c, total_n[1] + f)
    for size in denominator:
        c, f = factors(size)
        total_d = (total_d[0] * c, total_d[1] + f)
    quotient = exact_quotient(total_n, total_d)
    if quotient is None:
        return size_product(numerator) // size_product(denominator)
    coefficient, remaining = quotient
    return size_product(remaining) if coefficient == 1 else size_product([*remaining, coefficient])
