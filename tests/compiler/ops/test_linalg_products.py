"""Gradients of the matrix-vector and batched scaled sums (mv, dot, addmv, addr, baddbmm,
addbmm) through the compiler's autodiff against eager, and their errors."""

from __future__ import annotations

import pytest
import torch

import compiler
from tests.support.autodiff_util import check_gradients


def _make(seed: int, *shapes: tuple[int, ...]) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=g, dtype=torch.float64) for shape in shapes]


PROGRAMS = {
    "mv": (lambda m, v: torch.mv(m, v).tanh(), [(3, 5), (5,)]),
    "dot": (lambda a, b: torch.dot(a, b) * a, [(4,), (4,)]),
    "addmv": (lambda i, m, v: torch.addmv(i, m, v, beta=0.5, alpha=2), [(1,), (3, 4), (4,)]),
    "addr": (lambda i, a, b: torch.addr(i, a, b, alpha=-1), [(3, 4), (3,), (4,)]),
    "baddbmm": (
        lambda i, a, b: torch.baddbmm(i, a, b, beta=2, alpha=0.5).softmax(-1),
        [(1, 3, 5), (2, 3, 4), (2, 4, 5)],
    ),
    "addbmm": (lambda i, a, b: torch.addbmm(i, a, b, alpha=3), [(5,), (4, 3, 2), (4, 2, 5)]),
    "addbmm_beta0": (lambda i, a, b: torch.addbmm(i, a, b, beta=0), [(3, 5), (2, 3, 4), (2, 4, 5)]),
}


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_gradients_match_eager(name, seed):
    fn, shapes = PROGRAMS[name]
    # with beta=0 the input is not read (NaN included): it gets no gradient, where eager gives zeros
    requires_grad = [not name.endswith("beta0"), True, True][: len(shapes)]
    check_gradients(fn, _make(seed, *shapes), requires_grad, seed=seed)


def test_addbmm_is_one_matmul_over_every_batch():
    i, a, b = _make(0, (3, 5), (4, 3, 2), (4, 2, 5))
    jfn = compiler.jit(torch.addbmm)
    torch.testing.assert_close(jfn(i, a, b), torch.addbmm(i, a, b))
    matmuls = [b for b in compiler.last_traces(jfn)[-1].bsyms if "prims.matmul" in str(b)]
    assert len(matmuls) == 1


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: torch.mv(torch.randn(3), torch.randn(3)), "mv: expected a matrix and a vector"),
        (lambda: torch.dot(torch.randn(3), torch.randn(4)), "inner sizes differ"),
        (lambda: torch.baddbmm(torch.randn(3, 5), torch.randn(2, 3, 4), torch.randn(3, 4, 5)), "batch sizes differ"),
        (lambda: torch.addbmm(torch.randn(3, 5), torch.randn(3, 4), torch.randn(4, 5)), "rank 2; expected 3"),
    ],
)
def test_bad_operands_are_errors_naming_the_op(call, message):
    with pytest.raises(ValueError, match=message):
        compiler.jit(call)()
