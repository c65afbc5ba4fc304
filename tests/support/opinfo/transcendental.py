"""Op cases: log2, log10, tan, sinh, cosh, asinh, acosh, atanh and erfc (each a prim of its own,
compiler/ops/elementwise.py) with their `arc*` and `torch.special` spellings, sgn, and logaddexp2
(compiler/ops/special.py): values inside each function's domain, outside it, and the special points."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import torch

from tests.support.opinfo.elementwise import binary_samples, unary_samples
from tests.support.opinfo.samples import ALL, FLOATS, Maker, OpCase, Sample, method

_INF, _NAN = math.inf, math.nan
# Signed zeros, the ends of the domains (acosh's 1, atanh's +-1), tiny and huge values, infinities, NaN.
_POINTS = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 0.999, -0.999, 2.0, 1e-7, 88.0, -100.0, 1e30, _INF, -_INF, _NAN]


def _samples(domain: tuple[float, float] | None) -> Callable[[Maker], Iterator[Sample]]:
    def samples(make: Maker) -> Iterator[Sample]:
        low, high = domain if domain is not None else (None, None)
        if domain is not None and not make.is_float:
            low, high = math.ceil(low), math.floor(high) + 1
        yield from unary_samples(make, low, high)
        yield Sample((make(1, 6, low=low, high=high).expand(3, 6),))  # a broadcast (stride 0) input
        yield Sample((make(3, 4),))  # integers and bool give the default float dtype; floats outside the domain
        if make.is_float:
            yield Sample((torch.tensor(_POINTS, dtype=make.dtype),))

    return samples


def _unary(name: str, domain: tuple[float, float] | None = None, spellings: tuple[Callable, ...] = ()) -> OpCase:
    return OpCase(name, (getattr(torch, name), method(name), *spellings), _samples(domain), ALL)


def _logaddexp2_samples(make: Maker) -> Iterator[Sample]:
    """Tensor operands (torch.logaddexp2 takes no numbers), far apart, and every pair of infinities."""
    yield from binary_samples(make, scalars=False)
    yield Sample((make(3, 4, low=-200, high=200), make(4, low=-200, high=200)))
    edges = torch.tensor([_INF, -_INF, 0.0, -100.0, 100.0, 30.0, _NAN], dtype=make.dtype)
    yield Sample((edges[:, None], edges))  # all 49 pairs, by broadcasting


CASES = [
    _unary("log2", (0.05, 10)),
    _unary("log10", (0.05, 10)),
    _unary("tan", (-1.5, 1.5)),
    _unary("sinh", (-5, 5)),
    _unary("cosh", (-5, 5)),
    _unary("asinh", spellings=(torch.arcsinh, method("arcsinh"))),
    _unary("acosh", (1, 10), spellings=(torch.arccosh, method("arccosh"))),
    _unary("atanh", (-0.95, 0.95), spellings=(torch.arctanh, method("arctanh"))),
    _unary("erfc", spellings=(torch.special.erfc,)),
    _unary("sgn"),
    OpCase("logaddexp2", (torch.logaddexp2, method("logaddexp2")), _logaddexp2_samples, FLOATS),
]
