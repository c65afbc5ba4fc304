"""Gradients of the ops written as compositions (compiler/ops/matrix_compositions.py, cumulative.py,
float_power) against eager's, on random inputs, several seeds, float32 and float64: the VJPs of
the prims they are made of must add up to eager's own derivative formulas, zero-distance rows of
cdist included (eager gives them a zero gradient, not NaN)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import compiler


def _randn(generator: torch.Generator, dtype: torch.dtype, *shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=generator, dtype=dtype)


def _cdist_equal_rows(a: torch.Tensor, b: torch.Tensor, p: float) -> torch.Tensor:
    return torch.cdist(torch.cat([a, b[:1]]), b, p=p)


CASES: dict[str, tuple[Callable, tuple[tuple[int, ...], ...]]] = {
    "diag_vector": (lambda v: torch.diag(v, 2) * torch.diag(v, -2).exp(), ((4,),)),
    "diag_matrix": (lambda m: torch.diag(m, 1) * torch.diag(m.mT, -2).sum(), ((4, 5),)),
    "diag_embed": (lambda x: torch.diag_embed(x, -1, 2, 0), ((2, 3, 4),)),
    "trace": (lambda m: torch.trace(m) * m, ((5, 3),)),
    "tensordot_int": (lambda a, b: torch.tensordot(a, b, 2), ((2, 3, 4), (3, 4, 5))),
    "tensordot_lists": (lambda a, b: torch.tensordot(a, b, ([2, 0], [0, 1])), ((3, 2, 4), (4, 3, 2))),
    "kron": (torch.kron, ((2, 3), (3, 1, 2))),
    "cdist_2": (lambda a, b: torch.cdist(a, b), ((2, 5, 3), (4, 3))),
    "cdist_2_matmul": (lambda a, b: torch.cdist(a, b), ((30, 3), (6, 3))),
    "cdist_1": (lambda a, b: torch.cdist(a, b, 1.0), ((5, 3), (4, 3))),
    "cdist_3": (lambda a, b: torch.cdist(a, b, 3.0), ((5, 3), (2, 4, 3))),
    "cdist_half": (lambda a, b: torch.cdist(a, b, 0.5), ((5, 3), (4, 3))),
    "cdist_inf": (lambda a, b: torch.cdist(a, b, float("inf")), ((5, 3), (4, 3))),
    "cdist_2_equal_rows": (lambda a, b: _cdist_equal_rows(a, b, 2.0), ((3, 4), (5, 4))),
    "cdist_1.5_equal_rows": (lambda a, b: _cdist_equal_rows(a, b, 1.5), ((3, 4), (5, 4))),
    "cummax": (lambda x: torch.cummax(x, 1).values, ((3, 9),)),
    "cummin": (lambda x: x.cummin(0)[0], ((7, 4),)),
    "logcumsumexp": (lambda x: torch.logcumsumexp(x * 30, -1), ((3, 11),)),
    "float_power": (lambda x, y: torch.float_power(x.abs() + 0.5, y), ((3, 4), (4,))),
}


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", list(CASES))
def test_gradients_match_eager(name: str, dtype: torch.dtype, seed: int) -> None:
    fn, shapes = CASES[name]
    generator = torch.Generator().manual_seed(seed)
    inputs = [_randn(generator, dtype, *shape).requires_grad_() for shape in shapes]
    expected = fn(*inputs)
    cotangent = torch.randn(expected.shape, generator=generator, dtype=expected.dtype)
    got = torch.autograd.grad(compiler.jit(fn)(*inputs), inputs, cotangent)
    want = torch.autograd.grad(expected, inputs, cotangent)
    tolerance = {"rtol": 1e-4, "atol": 1e-4} if dtype == torch.float32 else {}
    for i, (g, w) in enumerate(zip(got, want)):
        assert not g.isnan().any(), f"gradient of input {i} has NaN"
        torch.testing.assert_close(g, w, **tolerance, msg=lambda m, i=i: f"gradient of input {i}: {m}")
