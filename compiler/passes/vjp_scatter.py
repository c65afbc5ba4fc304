"""VJP rules of the scatters (`prims.scatter`, `prims.scatter_reduce`): eager PyTorch's formulas
(its `scatter_reduce_backward`), written in prims.

The index and src have one shape (the ops layer cuts src to the index's), so src's cotangent is g
gathered at the index (`take_along_dim`). Where self does not take part (plain scatter, or
include_self=False), the positions the index writes get none of g: g is scattered with zeros
there. amax / amin share g evenly among the elements equal to the result, as eager does; with
include_self=False the self element at a written position is not counted among them (eager counts
it when it equals the result, giving a unique src maximum only part of the gradient).
"""

from __future__ import annotations

from collections.abc import Callable

from compiler import prims
from compiler.core.ir import BoundSymbol, TensorProxy
from compiler.passes.vjp_structural import zeros
from compiler.prims import Prim

Cotangents = list[tuple[TensorProxy, TensorProxy]]


def _scatter(bsym: BoundSymbol, g: TensorProxy) -> Cotangents:
    a, dim, index, src = bsym.args
    return [(a, prims.scatter(g, dim, index, zeros(src))), (src, prims.take_along_dim(g, index, dim))]


def _prod(
    bsym: BoundSymbol, g: TensorProxy, gather: Callable[[TensorProxy], TensorProxy]
) -> tuple[TensorProxy, TensorProxy]:
    """The product of the others: zeros of self and a src's only zero at its position are taken
    as 1 in a recomputed product (dividing by them would give NaN); two zeros give 0."""
    a, dim, index, src, _, include_self = bsym.args
    masked_a = prims.where(prims.eq(a, 0.0), 1.0, a)
    d_a = prims.div(prims.mul(g, prims.scatter_reduce(masked_a, dim, index, src, "prod", include_self)), masked_a)
    src_zero = prims.eq(src, 0.0)
    src_zeros = prims.scatter_reduce(zeros(a), dim, index, prims.convert_element_type(src_zero, a.dtype), "sum", True)
    single = prims.bitwise_and(src_zero, prims.eq(gather(src_zeros), 1.0))
    others = prims.scatter_reduce(a, dim, index, prims.where(single, 1.0, src), "prod", include_self)
    elsewhere = prims.div(gather(prims.mul(g, bsym.output)), prims.where(src_zero, 1.0, src))
    return d_a, prims.where(single, gather(prims.mul(g, others)), elsewhere)


def _mean(
    bsym: BoundSymbol, g: TensorProxy, gather: Callable[[TensorProxy], TensorProxy]
) -> tuple[TensorProxy, TensorProxy]:
    """g over the number of elements averaged at each position (1 where none)."""
    a, dim, index, _, _, include_self = bsym.args
    start = prims.full(list(a.shape), 1.0 if include_self else 0.0, g.dtype, g.device)
    ones = prims.full(list(index.shape), 1.0, g.dtype, g.device)
    counts = prims.scatter_reduce(start, dim, index, ones, "sum", True)
    counts = prims.where(prims.eq(counts, 0.0), 1.0, counts)
    return prims.div(g, counts), prims.div(gather(g), gather(counts))


def _extremum(
    bsym: BoundSymbol, g: TensorProxy, gather: Callable[[TensorProxy], TensorProxy]
) -> tuple[TensorProxy, TensorProxy]:
    """g shared evenly by the taking-part elements equal to the result (self's and src's)."""
    a, dim, index, src, _, include_self = bsym.args
    a_hit = prims.convert_element_type(prims.eq(a, bsym.output), g.dtype)
    if not include_self:
        a_hit = prims.scatter(a_hit, dim, index, zeros(src))
    src_hit = prims.convert_element_type(prims.eq(src, gather(bsym.output)), g.dtype)
    shared = prims.div(g, prims.scatter_reduce(a_hit, dim, index, src_hit, "sum", True))
    return prims.mul(a_hit, shared), prims.mul(src_hit, gather(shared))


def _scatter_reduce(bsym: BoundSymbol, g: TensorProxy) -> Cotangents:
    a, dim, index, src, reduce, include_self = bsym.args

    def gather(t: TensorProxy) -> TensorProxy:
        return prims.take_along_dim(t, index, dim)

    if reduce == "sum":
        d_a, d_src = g, gather(g)
    else:
        d_a, d_src = {"prod": _prod, "mean": _mean, "amax": _extremum, "amin": _extremum}[reduce](bsym, g, gather)
    if not include_self:
        d_a = prims.scatter(d_a, dim, index, zeros(src))
    return [(a, d_a), (src, d_src)]


SCATTER_RULES: dict[Prim, Callable[[BoundSymbol, TensorProxy], Cotangents]] = {
    Prim.SCATTER: _scatter,
    Prim.SCATTER_REDUCE: _scatter_reduce,
}
