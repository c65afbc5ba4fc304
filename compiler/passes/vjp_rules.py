"""VJP rules: for each differentiable prim, the cotangents of its arguments, written in prims.

A rule is `rule(bsym, g) -> [(argument proxy, its cotangent), ...]`: `bsym` is the forward line
(its arguments and its output, which a rule may read: `exp`'s cotangent is `g * out`) and `g` the
cotangent of its single output. Rules run while a pass traces the backward, so the prims they call
are recorded as the backward trace, which the same passes and executors then handle (elementwise
chains fuse). Rules return cotangents for every tensor argument they can; the autodiff pass keeps
the ones it needs and dead-code elimination drops the rest. Numbers never get cotangents.

`NONDIFFERENTIABLE` lists the prims whose outputs carry no gradient (comparisons, bitwise ops,
integer results, factories, guards, write-backs, and `stop_gradient`, eager's detach);
`ZERO_GRADIENT` the float-valued prims whose gradient is zero everywhere it exists (floor, ceil,
trunc, sign): their outputs still count as differentiable, as in eager PyTorch, where an input
reached only through them gets a zero gradient.
The structural prims (shapes, indexing, linear algebra) are in `vjp_structural.py`, the scatters
in `vjp_scatter.py`, attention in `vjp_attention.py`, convolution and grouped_mm in `vjp_library.py`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from compiler import prims
from compiler.core.ir import BoundSymbol, TensorProxy
from compiler.ops.reductions import expand_reduced
from compiler.passes.vjp_attention import ATTENTION_RULES, FORWARD_REWRITES
from compiler.passes.vjp_library import LIBRARY_RULES
from compiler.passes.vjp_scatter import SCATTER_RULES
from compiler.passes.vjp_structural import STRUCTURAL_RULES
from compiler.prims import COMPARISONS, FACTORIES, PROLOGUE_ONLY, Prim

Cotangents = list[tuple[TensorProxy, TensorProxy]]
Rule = Callable[[BoundSymbol, TensorProxy], Cotangents]

NONDIFFERENTIABLE = frozenset(
    COMPARISONS
    | FACTORIES
    | PROLOGUE_ONLY
    | {Prim.BITWISE_NOT, Prim.BITWISE_AND, Prim.BITWISE_OR, Prim.BITWISE_XOR, Prim.ARGMAX, Prim.FLOOR_DIVIDE}
    | {Prim.ARGSORT, Prim.TOPK}
    | {Prim.COPY_, Prim.COPY_TO, Prim.SDPA_BACKWARD, Prim.STOP_GRADIENT}
    | {Prim.CONVOLUTION_BACKWARD}
)
ZERO_GRADIENT = frozenset({Prim.FLOOR, Prim.CEIL, Prim.TRUNC, Prim.SIGN})


def _tensor(x: Any) -> bool:
    return isinstance(x, TensorProxy)


def _unary(derivative: Callable[[TensorProxy, TensorProxy, TensorProxy], TensorProxy]) -> Rule:
    """A rule for `out = f(a)` from `derivative(g, a, out) = g * f'(a)`."""

    def rule(bsym: BoundSymbol, g: TensorProxy) -> Cotangents:
        return [(bsym.args[0], derivative(g, bsym.args[0], bsym.output))]

    return rule


def _binary(da: Callable | None, db: Callable | None) -> Rule:
    """A rule for `out = f(a, b)` from `da(g, a, b, out)` and `db(g, a, b, out)` (tensor arguments only)."""

    def rule(bsym: BoundSymbol, g: TensorProxy) -> Cotangents:
        a, b = bsym.args
        result = []
        if da is not None and _tensor(a):
            result.append((a, da(g, a, b, bsym.output)))
        if db is not None and _tensor(b):
            result.append((b, db(g, a, b, bsym.output)))
        return result

    return rule


def _square(x: Any) -> Any:
    return prims.mul(x, x)


def _pow_base(g: Any, a: Any, b: Any, out: Any) -> Any:
    if isinstance(b, (int, float)):
        if b == 0:
            return prims.mul(g, 0.0)
        if b == 1:
            return g
        if b == 2:
            return prims.mul(g, prims.mul(a, 2.0))
        return prims.mul(g, prims.mul(prims.pow(a, b - 1), float(b)))
    return prims.mul(g, prims.mul(prims.pow(a, prims.sub(b, 1.0)), b))


def _pow_exponent(g: Any, a: Any, b: Any, out: Any) -> Any:
    return prims.mul(g, prims.mul(out, prims.log(a)))


def _atan2_reciprocal(a: Any, b: Any) -> Any:
    denominator = prims.add(_square(a), _square(b))
    return prims.where(prims.eq(denominator, 0.0), 0.0, prims.reciprocal(denominator))


# NOTE: eager's atan2_backward: g * x * r for y and g * -y * r for x, in that order, with r = 1 / (y² + x²)
# and 0 where y² + x² is 0 (at the origin, or where both squares underflow).
_atan2 = _binary(
    lambda g, a, b, out: prims.mul(prims.mul(g, b), _atan2_reciprocal(a, b)),
    lambda g, a, b, out: prims.mul(prims.mul(g, prims.neg(a)), _atan2_reciprocal(a, b)),
)


def _extremum(pick: Prim) -> Rule:
    """maximum / minimum: the gradient goes to the argument picked; ties split it in halves (as torch)."""

    def rule(bsym: BoundSymbol, g: TensorProxy) -> Cotangents:
        a, b = bsym.args
        tie = prims.eq(a, b)
        half = prims.mul(g, 0.5)
        a_wins = prims.bind(pick, a, b)
        result = []
        if _tensor(a):
            result.append((a, prims.where(a_wins, g, prims.where(tie, half, 0.0))))
        if _tensor(b):
            b_wins = prims.bind(pick, b, a)
            result.append((b, prims.where(b_wins, g, prims.where(tie, half, 0.0))))
        return result

    return rule


def _where(bsym: BoundSymbol, g: TensorProxy) -> Cotangents:
    condition, a, b = bsym.args
    result = []
    if _tensor(a):
        result.append((a, prims.where(condition, g, 0.0)))
    if _tensor(b):
        result.append((b, prims.where(condition, 0.0, g)))
    return result


def _convert(bsym: BoundSymbol, g: TensorProxy) -> Cotangents:
    a = bsym.args[0]
    if not _tensor(a) or not a.dtype.is_floating_point:
        return []
    return [(a, g if g.dtype == a.dtype else prims.convert_element_type(g, a.dtype))]


def _device_put(bsym: BoundSymbol, g: TensorProxy) -> Cotangents:
    a = bsym.args[0]
    if not a.dtype.is_floating_point:
        return []
    return [(a, prims.device_put(g, a.device))]


def _sum(bsym: BoundSymbol, g: TensorProxy) -> Cotangents:
    a, dims = bsym.args
    return [(a, expand_reduced(g, a.shape, dims))]


def _amax_amin(bsym: BoundSymbol, g: TensorProxy) -> Cotangents:
    """The gradient is shared evenly by the elements equal to the extremum (as torch's amax)."""
    a, dims = bsym.args
    if not dims:
        return [(a, g)]
    hit = prims.eq(a, expand_reduced(bsym.output, a.shape, dims))
    ties = prims.sum(prims.convert_element_type(hit, g.dtype), dims)
    return [(a, prims.where(hit, expand_reduced(prims.div(g, ties), a.shape, dims), 0.0))]


def _prod(bsym: BoundSymbol, g: TensorProxy) -> Cotangents:
    """Eager's formula: an element's gradient is the product of the others, so with one zero in its
    slice only the zero gets one (the product of the nonzero elements), and with two none does."""
    a, dims = bsym.args
    if not dims:
        return [(a, g)]
    zero = prims.eq(a, 0.0)
    safe = prims.where(zero, 1.0, a)
    nonzero_product = expand_reduced(prims.prod(safe, dims), a.shape, dims)
    zeros = expand_reduced(prims.sum(prims.convert_element_type(zero, a.dtype), dims), a.shape, dims)
    at_zero = prims.where(prims.eq(zeros, 1.0), nonzero_product, 0.0)
    elsewhere = prims.where(prims.eq(zeros, 0.0), prims.div(nonzero_product, safe), 0.0)
    others = prims.where(zero, at_zero, elsewhere)
    return [(a, prims.mul(expand_reduced(g, a.shape, dims), others))]


def _cumprod(bsym: BoundSymbol, g: TensorProxy) -> Cotangents:
    """Element j reaches the running products from j on, as the product of the others in each.
    Before a slice's first zero that is the reverse running sum of g * out, over a_j; at the first
    zero it is that sum over the running products with the zero taken as 1; after it, 0."""
    a, dim = bsym.args
    zero = prims.eq(a, 0.0)
    zeros_so_far = prims.cumsum(prims.convert_element_type(zero, a.dtype), dim, False)
    before = prims.eq(zeros_so_far, 0.0)
    first = prims.bitwise_and(zero, prims.eq(zeros_so_far, 1.0))
    ahead = prims.div(prims.cumsum(prims.mul(g, bsym.output), dim, True), prims.where(before, a, 1.0))
    skipping = prims.cumprod(prims.where(first, 1.0, a), dim)
    at_first = prims.cumsum(prims.mul(g, skipping), dim, True)
    return [(a, prims.where(before, ahead, prims.where(first, at_first, 0.0)))]


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_HALF_SQRT_PI = 0.5 * math.sqrt(math.pi)

_ELEMENTWISE_RULES: dict[Prim, Rule] = {
    Prim.NEG: _unary(lambda g, a, out: prims.neg(g)),
    Prim.ABS: _unary(lambda g, a, out: prims.mul(g, prims.sign(a))),
    Prim.EXP: _unary(lambda g, a, out: prims.mul(g, out)),
    Prim.EXP2: _unary(lambda g, a, out: prims.mul(g, prims.mul(out, math.log(2.0)))),
    Prim.LOG: _unary(lambda g, a, out: prims.div(g, a)),
    Prim.LOG1P: _unary(lambda g, a, out: prims.div(g, prims.add(a, 1.0))),
    Prim.LOG2: _unary(lambda g, a, out: prims.div(g, prims.mul(a, math.log(2.0)))),
    Prim.LOG10: _unary(lambda g, a, out: prims.div(g, prims.mul(a, math.log(10.0)))),
    Prim.SQRT: _unary(lambda g, a, out: prims.div(prims.mul(g, 0.5), out)),
    Prim.RSQRT: _unary(lambda g, a, out: prims.mul(prims.mul(g, -0.5), prims.mul(out, _square(out)))),
    Prim.SIN: _unary(lambda g, a, out: prims.mul(g, prims.cos(a))),
    Prim.COS: _unary(lambda g, a, out: prims.neg(prims.mul(g, prims.sin(a)))),
    Prim.TAN: _unary(lambda g, a, out: prims.mul(g, prims.add(_square(out), 1.0))),
    Prim.SINH: _unary(lambda g, a, out: prims.mul(g, prims.cosh(a))),
    Prim.COSH: _unary(lambda g, a, out: prims.mul(g, prims.sinh(a))),
    Prim.TANH: _unary(lambda g, a, out: prims.mul(g, prims.sub(1.0, _square(out)))),
    Prim.ASINH: _unary(lambda g, a, out: prims.mul(g, prims.rsqrt(prims.add(_square(a), 1.0)))),
    # NOTE: a * a - 1, eager's, not (a - 1)(a + 1): the same digits as eager's gradient near a = 1
    Prim.ACOSH: _unary(lambda g, a, out: prims.mul(g, prims.rsqrt(prims.sub(_square(a), 1.0)))),
    Prim.ATANH: _unary(lambda g, a, out: prims.div(g, prims.sub(1.0, _square(a)))),
    Prim.ERF: _unary(lambda g, a, out: prims.mul(g, prims.mul(prims.exp(prims.neg(_square(a))), _TWO_OVER_SQRT_PI))),
    Prim.ERFC: _unary(lambda g, a, out: prims.mul(g, prims.mul(prims.exp(prims.neg(_square(a))), -_TWO_OVER_SQRT_PI))),
    Prim.ERFINV: _unary(lambda g, a, out: prims.mul(g, prims.mul(prims.exp(_square(out)), _HALF_SQRT_PI))),
    Prim.RECIPROCAL: _unary(lambda g, a, out: prims.neg(prims.mul(g, _square(out)))),
    **{p: (lambda bsym, g: []) for p in ZERO_GRADIENT},
    Prim.ADD: _binary(lambda g, a, b, out: g, lambda g, a, b, out: g),
    Prim.SUB: _binary(lambda g, a, b, out: g, lambda g, a, b, out: prims.neg(g)),
    Prim.MUL: _binary(lambda g, a, b, out: prims.mul(g, b), lambda g, a, b, out: prims.mul(g, a)),
    Prim.DIV: _binary(
        lambda g, a, b, out: prims.div(g, b), lambda g, a, b, out: prims.neg(prims.div(prims.mul(g, out), b))
    ),
    Prim.REMAINDER: _binary(
        lambda g, a, b, out: g, lambda g, a, b, out: prims.neg(prims.mul(g, prims.floor(prims.div(a, b))))
    ),
    Prim.FMOD: _binary(
        lambda g, a, b, out: g, lambda g, a, b, out: prims.neg(prims.mul(g, prims.trunc(prims.div(a, b))))
    ),
    Prim.POW: _binary(_pow_base, _pow_exponent),
    Prim.ATAN2: _atan2,
    Prim.MAXIMUM: _extremum(Prim.GT),
    Prim.MINIMUM: _extremum(Prim.LT),
    Prim.WHERE: _where,
    Prim.CONVERT_ELEMENT_TYPE: _convert,
    Prim.DEVICE_PUT: _device_put,
    Prim.SUM: _sum,
    Prim.AMAX: _amax_amin,
    Prim.AMIN: _amax_amin,
    Prim.PROD: _prod,
    Prim.CUMPROD: _cumprod,
}

# The VJP table: prim -> rule. Every prim is here, in NONDIFFERENTIABLE, or rewritten before
# differentiation (`FORWARD_REWRITES`: attention) (tests/compiler/passes/autodiff/test_rules.py).
VJP: dict[Prim, Rule] = {
    **_ELEMENTWISE_RULES,
    **STRUCTURAL_RULES,
    **SCATTER_RULES,
    **ATTENTION_RULES,
    **LIBRARY_RULES,
}
REWRITTEN = frozenset(FORWARD_REWRITES)
