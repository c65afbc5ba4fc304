"""Op cases: elementwise unary and binary ops, where/clamp/lerp/addcmul/addcdiv/masked_fill, casts."""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F

from tests.support.opinfo.samples import ALL, FLOATS, Maker, OpCase, Sample, method, named

INTS = (torch.int64,)

# ---------------------------------------------------------------------------------------------
# Unary


def unary_samples(make: Maker, low: float | None = None, high: float | None = None) -> Iterator[Sample]:
    """Plain, broadcast-shaped, sliced, transposed, 0-d and empty inputs (values in [low, high))."""
    kw = {"low": low, "high": high} if low is not None or high is not None else {}
    yield Sample((make(5, 7, **kw),))
    yield Sample((make(4, 1, 3, noncontiguous=True, **kw),))
    yield Sample((make(3, 6, transposed=True, **kw),))
    yield Sample((make(**kw),))
    yield Sample((make(0, 3, **kw),))


def _unary(
    name: str,
    dtypes: tuple = ALL,
    extra: tuple[Callable, ...] = (),
    domain: tuple[float, float] | None = None,
) -> OpCase:
    """torch.<name> and Tensor.<name> (and `extra` callables) on values in `domain`, and outside it."""

    def samples(make: Maker) -> Iterator[Sample]:
        if domain is None:
            yield from unary_samples(make)
            return
        low, high = domain
        if not make.is_float:
            low, high = math.ceil(low), math.floor(high) + 1
        yield from unary_samples(make, low, high)
        yield Sample((make(3, 4),))  # values outside the domain give NaN (or inf), as in eager

    return OpCase(name, (getattr(torch, name), method(name), *extra), samples, dtypes)


def _activation_samples(make: Maker) -> Iterator[Sample]:
    yield from unary_samples(make)
    yield Sample((make(2, 9, low=-40, high=40),))  # saturating tails


UNARY = [
    _unary("neg", extra=(operator.neg, torch.negative, method("negative"))),
    _unary("positive", extra=(operator.pos,)),
    _unary("abs", extra=(operator.abs, torch.absolute, method("absolute"))),
    _unary("exp", domain=(-5, 5)),
    _unary("exp2", domain=(-5, 5), extra=(torch.special.exp2,)),
    _unary("log", domain=(0.05, 10)),
    _unary("log1p", domain=(-0.9, 10), extra=(torch.special.log1p,)),
    _unary("sqrt", domain=(0, 10)),
    _unary("rsqrt", domain=(0.05, 10)),
    _unary("sin"),
    _unary("cos"),
    _unary("tanh"),
    _unary("erf", extra=(torch.special.erf,)),
    _unary("reciprocal", domain=(0.1, 10)),
    _unary("square"),
    _unary("floor"),
    _unary("ceil"),
    _unary("trunc", extra=(torch.fix, method("fix"))),
    _unary("sign"),
    _unary("isnan", dtypes=FLOATS),
    _unary("logical_not"),
    _unary("bitwise_not", dtypes=(torch.int64, torch.bool), extra=(operator.invert,)),
    OpCase("sigmoid", (torch.sigmoid, method("sigmoid"), F.sigmoid, torch.special.expit), _activation_samples, ALL),
    OpCase("relu", (torch.relu, method("relu"), F.relu), _activation_samples, ALL),
    OpCase("silu", (F.silu,), _activation_samples, FLOATS),
    OpCase(
        "gelu",
        (F.gelu, named("gelu_tanh", functools.partial(F.gelu, approximate="tanh"))),
        _activation_samples,
        FLOATS,
    ),
]


def _nan_samples(make: Maker) -> Iterator[Sample]:
    x = make(4, 5)
    x[1, 2] = float("nan")
    x[3, 0] = float("nan")
    yield Sample((x,))


UNARY.append(OpCase("isnan_with_nans", (torch.isnan, method("isnan")), _nan_samples, FLOATS))


def _special_values_samples(make: Maker) -> Iterator[Sample]:
    x = make(4, 5)
    x[0, 0], x[1, 1], x[2, 2], x[3, 3] = float("inf"), float("-inf"), float("nan"), 0.0
    yield Sample((x,))
    yield Sample((make(3, 4, transposed=True),))


for _name in ("isinf", "isfinite", "isposinf", "isneginf"):
    UNARY.append(_unary(_name))  # integers and bools: never inf, always finite
    UNARY.append(
        OpCase(f"{_name}_of_specials", (getattr(torch, _name), method(_name)), _special_values_samples, FLOATS)
    )


def _edges(make: Maker, *values: float) -> torch.Tensor:
    """A 1-d tensor of the dtype under test holding `values`, then random values."""
    return torch.cat([torch.tensor(values, dtype=make.dtype), make(6)])


_INF, _NAN = math.inf, math.nan


def _softplus_samples(make: Maker) -> Iterator[Sample]:
    yield from _activation_samples(make)
    yield Sample((_edges(make, -100, -30, 0, 19.5, 20, 20.5, 30, 100, _INF, -_INF, _NAN),))
    yield Sample((make(3, 4, low=-10, high=10, transposed=True),), {"beta": 2.0, "threshold": 5.0})
    yield Sample((_edges(make, 2.4, 2.5, 2.6, -3),), {"beta": 2, "threshold": 5})  # beta * x near the threshold
    yield Sample((make(2, 5, low=-5, high=5),), {"beta": 0.5})


def _logsigmoid_samples(make: Maker) -> Iterator[Sample]:
    yield from _activation_samples(make)
    yield Sample((_edges(make, -100, -20, -1e-3, 0, 1e-3, 20, 100, _INF, -_INF, _NAN),))


def _saturating_samples(make: Maker) -> Iterator[Sample]:
    """Activation samples plus the tails, the kinks at -3, 0, 3 and the infinities."""
    yield from _activation_samples(make)
    yield Sample((_edges(make, -100, -3, -1, 0, 1, 3, 100, _INF, -_INF, _NAN),))


def _inplace_false(fn: Callable) -> Callable:
    return named(f"{fn.__name__}_inplace_false", functools.partial(fn, inplace=False))


def _celu_samples(make: Maker) -> Iterator[Sample]:
    yield from _saturating_samples(make)
    yield Sample((make(3, 4, low=-8, high=4, transposed=True),), {"alpha": 2.0})
    yield Sample((make(5, low=-8, high=4),), {"alpha": 0.5})


def _elu_samples(make: Maker) -> Iterator[Sample]:
    yield from _saturating_samples(make)
    yield Sample((make(3, 4, low=-8, high=4, transposed=True),), {"alpha": 0.3})


def _glu_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(3, 8),))
    yield Sample((make(4, 6, 3, noncontiguous=True),), {"dim": 1})
    yield Sample((make(6, 5, transposed=True), 0))
    yield Sample((make(2, 4, low=-60, high=60), -2))
    yield Sample((make(0, 4),))
    yield Sample((make(3, 0),))


UNARY += [
    OpCase("softplus", (F.softplus,), _softplus_samples, FLOATS),
    OpCase("logsigmoid", (F.logsigmoid,), _logsigmoid_samples, FLOATS),
    OpCase("mish", (F.mish, _inplace_false(F.mish)), _saturating_samples, FLOATS),
    OpCase("hardsigmoid", (F.hardsigmoid, _inplace_false(F.hardsigmoid)), _saturating_samples, FLOATS),
    OpCase("hardswish", (F.hardswish, _inplace_false(F.hardswish)), _saturating_samples, FLOATS),
    OpCase("celu", (F.celu, _inplace_false(F.celu)), _celu_samples, FLOATS),
    OpCase("elu", (F.elu, _inplace_false(F.elu)), _elu_samples, FLOATS),
    OpCase("selu", (F.selu, _inplace_false(F.selu)), _saturating_samples, FLOATS),
    OpCase("glu", (F.glu,), _glu_samples, FLOATS),
]


def _nan_to_num_samples(make: Maker) -> Iterator[Sample]:
    yield from unary_samples(make)
    if not make.is_float:
        yield Sample((make(3, 4),), {"nan": 1.0, "posinf": 2.0, "neginf": -2.0})
        return
    x = _edges(make, _NAN, _INF, -_INF, 0, -1.5, _NAN)
    yield Sample((x,))
    yield Sample((x,), {"nan": 1.5, "posinf": 1e4, "neginf": -1e4})
    yield Sample((x, None, -7.0))  # nan=None is 0, posinf given positionally
    yield Sample((x,), {"neginf": 3.0})
    t = make(4, 6)
    t[0, 1], t[2, 3], t[3, 0] = _NAN, _INF, -_INF
    yield Sample((t.mT,))
    yield Sample((torch.tensor(_INF, dtype=make.dtype),))


UNARY.append(OpCase("nan_to_num", (torch.nan_to_num, method("nan_to_num")), _nan_to_num_samples, ALL))

# ---------------------------------------------------------------------------------------------
# Binary


def binary_samples(make: Maker, *, scalars: bool = True, exclude_zero: bool = False, **kw: float) -> Iterator[Sample]:
    """Same shapes, broadcasting both ways, size-1 dims, 0-d operands, non-contiguous operands,
    mixed dtypes (promotion) and Python scalars."""
    m = functools.partial(make, exclude_zero=exclude_zero, **kw)
    yield Sample((m(5, 7), m(5, 7)))
    yield Sample((m(4, 1, 3), m(5, 3, noncontiguous=True)))
    yield Sample((m(3, 4, transposed=True), m(4)))
    yield Sample((m(1, 6), m(3, 1)))
    yield Sample((m(2, 3), m()))
    yield Sample((m(), m()))
    if make.dtype != torch.float64:
        yield Sample((m(2, 3), m(2, 3, dtype=torch.float64)))  # promotion across floats and ints
    if make.dtype != torch.int64:
        yield Sample((m(2, 3), m(3, dtype=torch.int64)))
    if scalars:
        yield Sample((m(3, 4), 3))
        yield Sample((m(3, 4), -1.5 if make.is_float else 2))
        yield Sample((m(3, 4), m(dtype=torch.float64)))  # a 0-d tensor does not promote its category


def _binary(
    name: str,
    dunders: tuple[Callable, ...] = (),
    dtypes: tuple = ALL,
    sampler: Callable[[Maker], Iterator[Sample]] = binary_samples,
    aliases: tuple[Callable, ...] = (),
    tolerances: dict | None = None,
) -> OpCase:
    variants = (getattr(torch, name), method(name), *dunders, *aliases)
    return OpCase(name, variants, sampler, dtypes, tolerances or {})


def _reflected(op: Callable, name: str) -> Callable:
    """`op(other, self)`: a Python scalar on the left reaches the reflected dunder."""
    return named(name, lambda a, b: op(b, a))


def _scalar_left_samples(make: Maker, **kw: float) -> Iterator[Sample]:
    yield Sample((make(3, 4, **kw), 2))
    yield Sample((make(3, 4, **kw), 0.5))
    yield Sample((make(3, **kw), make(2, 3, **kw)))


def _alpha_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(3, 4), make(4)), {"alpha": 2})
    yield Sample((make(3, 4), 3), {"alpha": -1})
    if make.is_float:
        yield Sample((make(3, 4), make(3, 1)), {"alpha": 0.5})


def _divisor_samples(make: Maker) -> Iterator[Sample]:
    yield from binary_samples(make, exclude_zero=True)


def _div_rounding_samples(make: Maker) -> Iterator[Sample]:
    for mode in ("trunc", "floor"):
        yield Sample((make(5, 7, low=-20, high=20), make(5, 7, exclude_zero=True)), {"rounding_mode": mode})
        yield Sample((make(3, 4), make(4, exclude_zero=True, noncontiguous=True)), {"rounding_mode": mode})
        yield Sample((make(3, 4, low=-20, high=20), 3), {"rounding_mode": mode})
        yield Sample((make(3, 4, low=-20, high=20), -2.5), {"rounding_mode": mode})
        yield Sample((make(3, 4), make(4, dtype=torch.float32, exclude_zero=True)), {"rounding_mode": mode})
    yield Sample((make(3, 4), make(4, exclude_zero=True)), {"rounding_mode": None})


def _pow_samples(make: Maker) -> Iterator[Sample]:
    if make.is_float:
        yield Sample((make(5, 7, low=0.1, high=3), make(5, 7, low=-2, high=2)))
        yield Sample((make(4, 1, 3, low=0.1, high=3), make(5, 3, noncontiguous=True, low=-2, high=2)))
        yield Sample((make(3, 4), make(low=0, high=3)))
        for exponent in (2, 3, 1, 0, -1, 0.5, 2.0, -0.5):
            yield Sample((make(3, 4, low=0.1, high=3), exponent))
    else:
        yield Sample((make(5, 7, low=-4, high=4), make(5, 7, low=0, high=4)))
        yield Sample((make(3, 1, low=-4, high=4), make(4, low=0, high=4)))
        for exponent in (2, 3, 1, 0, 0.5):
            yield Sample((make(3, 4, low=0, high=5), exponent))


def _rpow_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(3, 4, low=-2, high=3), 2))
    yield Sample((make(3, 4, low=-2, high=3), 1.5))


def _comparison_samples(make: Maker) -> Iterator[Sample]:
    m = make.small_values
    yield Sample((m(5, 7), m(5, 7)))
    yield Sample((m(4, 1, 3), m(5, 3, noncontiguous=True)))
    yield Sample((m(3, 4, transposed=True), m()))
    yield Sample((m(3, 4), 1))
    yield Sample((m(3, 4), 0.5))
    yield Sample((m(3, 4), m(4, dtype=torch.float64 if make.dtype != torch.float64 else torch.int64)))


def _logical_samples(make: Maker) -> Iterator[Sample]:
    """As for comparisons, without Python scalars (torch.logical_and takes tensors only)."""
    for sample in _comparison_samples(make):
        if all(isinstance(a, torch.Tensor) for a in sample.args):
            yield sample
    yield Sample((make.small_values(2, 3) > 0, make.small_values(3)))


def _bitwise_samples(make: Maker) -> Iterator[Sample]:
    if make.dtype == torch.bool:
        yield Sample((make(5, 7), make(5, 7)))
        yield Sample((make(4, 1, 3), make(5, 3, noncontiguous=True)))
        yield Sample((make(3, 4), True))
        return
    yield Sample((make(5, 7, low=-100, high=100), make(5, 7, low=-100, high=100)))
    yield Sample((make(4, 1, 3), make(5, 3, noncontiguous=True)))
    yield Sample((make(3, 4, transposed=True), 6))
    yield Sample((make(3, 4), make(4, dtype=torch.bool)))


def _logaddexp_samples(make: Maker) -> Iterator[Sample]:
    """Tensor operands (torch.logaddexp takes no numbers), far apart, and every pair of infinities."""
    yield from binary_samples(make, scalars=False)
    yield Sample((make(3, 4, low=-100, high=100), make(4, low=-100, high=100)))
    edges = torch.tensor([_INF, -_INF, 0.0, -100.0, 100.0, _NAN], dtype=make.dtype)
    yield Sample((edges[:, None], edges))  # all 36 pairs, by broadcasting


BITWISE_DTYPES = (torch.int64, torch.bool)


def _shift_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(5, 7, low=-100, high=100), 3))
    yield Sample((make(3, 4, transposed=True, low=-(2**40), high=2**40), 40))  # high bits dropped
    yield Sample((make(4, 8, low=-(2**31), high=2**31), torch.arange(0, 32, 4)))  # unpacking nibbles
    yield Sample((make(2, 1, 3, dtype=torch.int32, low=-1000, high=1000), make(4, 3, low=0, high=31)))
    yield Sample((make(6, dtype=torch.uint8, low=0, high=255), 5))


BINARY = [
    _binary("add", (operator.add, _reflected(operator.add, "radd"))),
    _binary("sub", (operator.sub,), aliases=(torch.subtract, method("subtract"))),
    OpCase("add_alpha", (torch.add, method("add")), _alpha_samples),
    OpCase("sub_alpha", (torch.sub, method("sub"), torch.subtract, method("subtract")), _alpha_samples),
    OpCase("rsub", (_reflected(operator.sub, "rsub"), torch.rsub), _scalar_left_samples, ALL),
    _binary("mul", (operator.mul, _reflected(operator.mul, "rmul")), aliases=(torch.multiply, method("multiply"))),
    _binary("div", (operator.truediv,), sampler=_divisor_samples, aliases=(torch.divide, method("divide"))),
    OpCase("div_rounding", (torch.div, method("div"), torch.divide, method("divide")), _div_rounding_samples),
    OpCase("true_divide", (torch.true_divide, method("true_divide")), _divisor_samples, ALL),
    OpCase(
        "rtruediv",
        (_reflected(operator.truediv, "rtruediv"),),
        functools.partial(_scalar_left_samples, exclude_zero=True),
        ALL,
    ),
    _binary("floor_divide", (operator.floordiv,), sampler=_divisor_samples),
    OpCase(
        "rfloordiv",
        (_reflected(operator.floordiv, "rfloordiv"),),
        functools.partial(_scalar_left_samples, exclude_zero=True),
        ALL,
    ),
    _binary("remainder", (operator.mod,), sampler=_divisor_samples),
    OpCase("rmod", (_reflected(operator.mod, "rmod"),), functools.partial(_scalar_left_samples, exclude_zero=True)),
    _binary("fmod", sampler=_divisor_samples),
    _binary("pow", (operator.pow,), sampler=_pow_samples),
    OpCase("rpow", (_reflected(operator.pow, "rpow"),), _rpow_samples, FLOATS),
    _binary("maximum", sampler=lambda make: binary_samples(make, scalars=False)),
    _binary("minimum", sampler=lambda make: binary_samples(make, scalars=False)),
    _binary("logaddexp", dtypes=FLOATS, sampler=lambda make: _logaddexp_samples(make)),
    *(
        _binary(name, (dunder,), sampler=_comparison_samples, aliases=(getattr(torch, a), method(a)) if a else ())
        for name, dunder, a in (
            ("eq", operator.eq, None),
            ("ne", operator.ne, "not_equal"),
            ("lt", operator.lt, "less"),
            ("le", operator.le, "less_equal"),
            ("gt", operator.gt, "greater"),
            ("ge", operator.ge, "greater_equal"),
        )
    ),
    _binary("logical_and", sampler=_logical_samples),
    _binary("logical_or", sampler=_logical_samples),
    _binary("logical_xor", sampler=_logical_samples),
    _binary(
        "bitwise_and", (operator.and_, _reflected(operator.and_, "rand")), BITWISE_DTYPES, sampler=_bitwise_samples
    ),
    _binary("bitwise_or", (operator.or_, _reflected(operator.or_, "ror")), BITWISE_DTYPES, sampler=_bitwise_samples),
    _binary("bitwise_xor", (operator.xor, _reflected(operator.xor, "rxor")), BITWISE_DTYPES, sampler=_bitwise_samples),
    _binary("bitwise_left_shift", (operator.lshift,), (torch.int64,), sampler=_shift_samples),
    _binary("bitwise_right_shift", (operator.rshift,), (torch.int64,), sampler=_shift_samples),
]

# ---------------------------------------------------------------------------------------------
# where, clamp, lerp, addcmul, addcdiv, masked_fill


def _where_samples(make: Maker) -> Iterator[Sample]:
    def cond(*shape: int) -> torch.Tensor:
        return make(*shape, dtype=torch.bool)

    yield Sample((cond(5, 7), make(5, 7), make(5, 7)))
    yield Sample((cond(4, 1, 3), make(5, 3, noncontiguous=True), make(1, 3)))
    yield Sample((cond(3, 4), make(3, 4, transposed=True), 0))
    yield Sample((cond(3, 4), 2, make(4)))
    yield Sample((cond(2, 3), make(2, 3), make(2, 3, dtype=torch.float64)))
    yield Sample((cond(), make(2), make()))


def _where_method(condition: torch.Tensor, input: object, other: object) -> torch.Tensor:
    """`input.where(condition, other)`; a scalar `input` has no method, so it goes through torch.where."""
    if isinstance(input, (int, float, bool)):
        return torch.where(condition, input, other)
    return input.where(condition, other)


def _clamp_samples(make: Maker) -> Iterator[Sample]:
    low, high = (-0.5, 0.5) if make.is_float else (-3, 3)
    yield Sample((make(5, 7), low, high))
    yield Sample((make(4, 1, 3, noncontiguous=True),), {"min": low})
    yield Sample((make(3, 4, transposed=True),), {"max": high})
    yield Sample((make(3, 4), make(4), make(3, 1)))
    yield Sample((make(),), {"min": low, "max": low})
    yield Sample((make(3, 4), high, low))  # min > max: everything becomes max, as in torch


def _clamp_min_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(5, 7), 1))
    yield Sample((make(3, 4, noncontiguous=True), make(4)))


def _lerp_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(5, 7), make(5, 7), 0.3))
    yield Sample((make(5, 7), make(5, 7), 0.8))
    yield Sample((make(4, 1, 3), make(5, 3, noncontiguous=True), make(4, 5, 3, low=0, high=1)))
    yield Sample((make(3, 4, transposed=True), make(4), make(3, 1, low=-1, high=2)))
    yield Sample((make(), make(), make()))


def _addc_samples(make: Maker, divisor: bool) -> Iterator[Sample]:
    d = {"exclude_zero": True} if divisor else {}
    yield Sample((make(5, 7), make(5, 7), make(5, 7, **d)))
    yield Sample((make(4, 1, 3), make(5, 3, noncontiguous=True), make(3, **d)), {"value": 2})
    yield Sample((make(3, 4, transposed=True), make(3, 1), make(4, **d)), {"value": 0.5 if make.is_float else 3})
    yield Sample((make(), make(), make(**d)))


def _masked_fill_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(5, 7), make(5, 7, dtype=torch.bool), 2))
    yield Sample((make(4, 2, 3, noncontiguous=True), make(2, 1, dtype=torch.bool), -1.5 if make.is_float else 7))
    yield Sample((make(3, 4, transposed=True), make(4, dtype=torch.bool), make()))
    yield Sample((make(3, 4), make(dtype=torch.bool), make(dtype=torch.float64)))


TERNARY = [
    OpCase("where", (torch.where, _where_method), _where_samples, ALL),
    OpCase("clamp", (torch.clamp, method("clamp"), torch.clip, method("clip")), _clamp_samples, ALL),
    OpCase("clamp_min", (torch.clamp_min, method("clamp_min")), _clamp_min_samples, ALL),
    OpCase("clamp_max", (torch.clamp_max, method("clamp_max")), _clamp_min_samples, ALL),
    OpCase("lerp", (torch.lerp, method("lerp")), _lerp_samples, FLOATS),
    OpCase("addcmul", (torch.addcmul, method("addcmul")), functools.partial(_addc_samples, divisor=False), ALL),
    OpCase("addcdiv", (torch.addcdiv, method("addcdiv")), functools.partial(_addc_samples, divisor=True), FLOATS),
    OpCase("masked_fill", (torch.masked_fill, method("masked_fill")), _masked_fill_samples, ALL),
]

# ---------------------------------------------------------------------------------------------
# Type conversion


def _to_samples(make: Maker) -> Iterator[Sample]:
    x = make(3, 4, low=-50, high=50)
    for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.bool):
        yield Sample((x, dtype))
    yield Sample((make(2, 3, noncontiguous=True),), {"dtype": torch.float16})
    yield Sample((make(2, 3), "cpu", torch.float64))
    yield Sample((make(2, 3), make(1, dtype=torch.bfloat16)))  # to(other): other's dtype
    yield Sample((make(2, 3), torch.float32), {"copy": True})
    yield Sample((make(), make.dtype))


def _type_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(3, 4, low=-50, high=50), torch.bfloat16))
    yield Sample((make(3, 4, transposed=True), torch.int64))
    yield Sample((make(3, 4), torch.bool))
    yield Sample((make(2, 3), "torch.DoubleTensor"))  # a type name, as legacy code writes it


def _cast_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(3, 4, low=-50, high=50),))
    yield Sample((make(2, 3, noncontiguous=True),))
    yield Sample((make(),))


def _type_as_samples(make: Maker) -> Iterator[Sample]:
    for dtype in (torch.float32, torch.bfloat16, torch.int64, torch.bool):
        yield Sample((make(3, 4, low=-50, high=50), make(2, dtype=dtype)))


CASTS = [
    OpCase("to", (method("to"),), _to_samples, ALL),
    OpCase("type_as", (method("type_as"),), _type_as_samples, ALL),
    OpCase("type", (method("type"),), _type_samples, ALL),
    *(
        OpCase(name, (method(name),), _cast_samples, ALL)
        for name in ("float", "double", "half", "bfloat16", "int", "long", "bool")
    ),
]

CASES = UNARY + BINARY + TERNARY + CASTS
