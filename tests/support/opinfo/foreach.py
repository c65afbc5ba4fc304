"""Op cases: `torch._foreach_*` (out of place, and in place on clones so eager and the jitted call
start from the same values), and the queries optimizers make (is_complex, conj, detach)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch

from compiler.ops.foreach import _BINARY, _TERNARY, _UNARY
from tests.support.opinfo.samples import FLOATS, Maker, OpCase, Sample, method, named


def _lists(make: Maker, count: int) -> list[list[torch.Tensor]]:
    shapes = [(3, 4), (5,), (), (2, 3)]
    return [[make(*shapes[i % len(shapes)], noncontiguous=i == 0) for i in range(4)] for _ in range(count)]


def _positive(make: Maker) -> list[torch.Tensor]:
    return [make(3, 4, low=0.5, high=2.0), make(5, low=0.5, high=2.0), make(low=0.5, high=2.0)]


def _unary_samples(make: Maker) -> Iterator[Sample]:
    yield Sample(tuple(_lists(make, 1)))
    yield Sample((_positive(make),))


def _binary_samples(make: Maker) -> Iterator[Sample]:
    xs, ys = _lists(make, 2)
    yield Sample((xs, ys))
    yield Sample((xs, 1.5))
    yield Sample((xs, [0.5, 2.0, -1.0, 3.0]))
    yield Sample((xs, make()))  # one 0-d tensor for every element


def _add_sub_samples(make: Maker) -> Iterator[Sample]:
    yield from _binary_samples(make)
    xs, ys = _lists(make, 2)
    yield Sample((xs, ys), {"alpha": 0.5})


def _pow_samples(make: Maker) -> Iterator[Sample]:
    positive = _positive(make)
    yield Sample((positive, 2.0))
    yield Sample((positive, [make(3, 4), make(5), make()]))


def _scalar_base_pow_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((0.9, [make(3, 4), make(5), make()]))  # a number raised to each tensor


def _ternary_samples(make: Maker) -> Iterator[Sample]:
    xs, ys, zs = _lists(make, 3)
    zs = [z.abs() + 0.5 for z in zs]
    yield Sample((xs, ys, zs))
    yield Sample((xs, ys, zs, 0.5))
    yield Sample((xs, ys, zs, [0.5, -1.0, 2.0, 0.25]))
    yield Sample((xs, ys, zs, torch.tensor([0.5, -1.0, 2.0, 0.25])))  # a 1-D tensor of scalars


def _lerp_samples(make: Maker) -> Iterator[Sample]:
    xs, ys, ws = _lists(make, 3)
    yield Sample((xs, ys, 0.3))
    yield Sample((xs, ys, 0.8))
    yield Sample((xs, ys, ws))


def _copy_samples(make: Maker) -> Iterator[Sample]:
    xs, ys = _lists(make, 2)
    yield Sample((xs, ys))


def _in_place(name: str) -> Callable:
    op = getattr(torch, f"_foreach_{name}_")

    def fn(tensors: list, *args: object, **kwargs: object) -> list:
        targets = [t.clone() for t in tensors]
        op(targets, *args, **kwargs)
        return targets

    return named(f"_foreach_{name}_", fn)


def _case(name: str, samples: Callable, out_of_place: bool = True) -> OpCase:
    variants = ((getattr(torch, f"_foreach_{name}"),) if out_of_place else ()) + (_in_place(name),)
    return OpCase(f"_foreach_{name}", variants, samples, FLOATS)


_SAMPLES = {"add": _add_sub_samples, "sub": _add_sub_samples, "pow": _pow_samples, "lerp": _lerp_samples}
_SAMPLES |= {"copy": _copy_samples}

FOREACH = [_case(name, _unary_samples, name != "zero") for name in _UNARY]
FOREACH += [_case(name, _SAMPLES.get(name, _binary_samples), name != "copy") for name in _BINARY]
FOREACH += [_case(name, _SAMPLES.get(name, _ternary_samples)) for name in _TERNARY]
FOREACH += [OpCase("_foreach_pow(number, tensors)", (torch._foreach_pow,), _scalar_base_pow_samples, FLOATS)]


def _query_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(3, 4),))
    yield Sample((make(),))


def _plus_one(name: str, fn: Callable) -> Callable:
    """`fn(x) + 1`: the result is computed, so the jitted function does not return its input."""
    return named(name, lambda x: fn(x) + 1)


QUERIES = [
    OpCase("is_complex", (torch.is_complex, method("is_complex")), _query_samples),
    OpCase("is_floating_point", (torch.is_floating_point, method("is_floating_point")), _query_samples),
    OpCase("conj", (_plus_one("torch.conj", torch.conj), _plus_one("Tensor.conj", lambda x: x.conj())), _query_samples),
    OpCase(
        "detach",
        (_plus_one("torch.detach", torch.detach), _plus_one("Tensor.detach", lambda x: x.detach())),
        _query_samples,
    ),
    OpCase(
        "requires_grad_",
        (_plus_one("Tensor.requires_grad_", lambda x: torch.zeros_like(x).requires_grad_() * x),),
        _query_samples,
        FLOATS,
    ),
]

CASES = FOREACH + QUERIES
