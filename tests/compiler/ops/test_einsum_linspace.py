"""torch.einsum and torch.linspace against eager: values, dtypes, gradients, symbolic sizes, errors.

einsum contracts its operands left to right, two at a time, each contraction one (batched) matmul
(compiler/ops/linalg.py); linspace is an iota and arithmetic rounded as eager's kernels round it
(compiler/ops/factory.py). tests/support/opinfo/shape.py has their op-table samples too.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
import torch

import compiler
from compiler.prims import Prim
from compiler.tracing import frontend
from tests.support.autodiff_util import check_gradients

SEEDS = [0, 1, 2]
# (rtol, atol): products summed in another order than eager's; bf16 as the matmul table's
TOLERANCES = {torch.float32: {"rtol": 1e-5, "atol": 1e-5}, torch.bfloat16: {"rtol": 1.6e-2, "atol": 2e-2}}


def randn(*shape: int, seed: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def strided(x: torch.Tensor) -> torch.Tensor:
    """`x` as a non-contiguous tensor of the same values: its last two dims stored transposed (1-D:
    every other element of a buffer)."""
    if x.ndim >= 2:
        return x.mT.contiguous().mT
    if x.ndim == 1:
        return torch.stack([x, torch.zeros_like(x)], -1)[:, 0]
    return x


def prims_of(jfn: Callable) -> list[Prim]:
    """The prims of the first (tracing) trace of `jfn`'s last call, ops replaced by their decompositions."""
    return [b.sym for b in frontend.leaves(compiler.last_traces(jfn)[0].bsyms)]


# ---------------------------------------------------------------------------------------------
# einsum: values

EQUATIONS = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 8), (2, 3, 6, 8)]),  # attention scores
    ("i,j->ij", [(3,), (4,)]),  # outer product
    ("ij,ij->ij", [(3, 4), (3, 4)]),  # elementwise
    ("ij,ij->i", [(3, 4), (3, 4)]),  # row-wise dot products
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("ij->j", [(3, 4)]),
    ("ii->i", [(4, 4)]),  # a diagonal
    ("ii->", [(4, 4)]),  # the trace
    ("iij->ji", [(3, 3, 2)]),
    ("iii->i", [(3, 3, 3)]),
    ("ii,i->i", [(3, 3), (3,)]),
    ("...ij,...jk->...ik", [(5, 1, 2, 3), (4, 3, 6)]),  # batch dims broadcast
    ("...ij,...jk", [(2, 3, 4), (4, 5)]),  # implicit output with '...'
    ("ij...,jk...->ik", [(2, 3, 5), (3, 4, 5)]),  # '...' summed
    ("i...->...", [(3, 3)]),
    ("ij,jk", [(3, 4), (4, 5)]),  # implicit output: the letters used once, sorted
    ("ba,cb", [(4, 3), (5, 4)]),  # implicit: 'ac', not 'ca'
    ("ab,bC", [(2, 3), (3, 4)]),  # implicit: uppercase sorts first ('Ca')
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("bn,anm,bm->ba", [(2, 5), (3, 5, 4), (2, 4)]),  # bilinear
    ("ij,kl,jl->ik", [(2, 3), (4, 5), (3, 5)]),
    ("ij,jk->i", [(3, 4), (4, 5)]),  # k summed in its operand first
    ("ij,jk->k", [(3, 4), (4, 5)]),  # i summed in its operand first
    ("ij,jk->ik", [(2, 1), (3, 4)]),  # a size-1 dim broadcasts against 3
    ("ij,jk->ik", [(1, 3), (3, 1)]),
    ("ij,jk->ki", [(0, 3), (3, 4)]),  # empty
    ("ij,jk->ik", [(2, 0), (0, 4)]),  # an empty sum: zeros
    (" i j , j k -> i k ", [(3, 4), (4, 5)]),  # spaces
    ("->", [()]),
    ("i,->i", [(3,), ()]),
]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("layout", [lambda x: x, strided], ids=["contiguous", "strided"])
@pytest.mark.parametrize(("equation", "shapes"), EQUATIONS, ids=[e for e, _ in EQUATIONS])
def test_einsum_matches_eager(equation: str, shapes: list, layout: Callable, dtype: torch.dtype, seed: int) -> None:
    operands = [layout(randn(*s, seed=seed + i, dtype=dtype)) for i, s in enumerate(shapes)]
    want = torch.einsum(equation, *operands)
    got = compiler.jit(lambda *xs: torch.einsum(equation, *xs))(*operands)
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got, want, **TOLERANCES[dtype])


def test_einsum_takes_operands_as_a_list_or_in_sublist_format() -> None:
    a, b = randn(3, 4, seed=0), randn(4, 5, seed=1)
    want = a @ b
    torch.testing.assert_close(compiler.jit(lambda a, b: torch.einsum("ij,jk->ik", [a, b]))(a, b), want)
    torch.testing.assert_close(compiler.jit(lambda a, b: torch.einsum(a, [0, 1], b, [1, 2], [0, 2]))(a, b), want)
    diagonal = compiler.jit(lambda a: torch.einsum(a, [..., 0, 0]))  # implicit output: '...' first
    x = randn(2, 3, 3, seed=2)
    torch.testing.assert_close(diagonal(x), torch.einsum(x, [..., 0, 0]))


@pytest.mark.parametrize(
    ("equation", "shapes", "want_dtype"),
    [
        ("ij,jk->ik", [(3, 4), (4, 5)], torch.int32),
        ("i,j->ij", [(3,), (4,)], torch.int32),
        ("ii->i", [(3, 3)], torch.int32),
        ("ij->i", [(3, 4)], torch.int64),  # one operand summed: torch.sum's int64
        ("ii->", [(3, 3)], torch.int64),
    ],
)
def test_einsum_of_integers_is_exact_with_eagers_dtypes(equation: str, shapes: list, want_dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(0)
    operands = [torch.randint(-9, 10, s, generator=g, dtype=torch.int32) for s in shapes]
    want = torch.einsum(equation, *operands)
    got = compiler.jit(lambda *xs: torch.einsum(equation, *xs))(*operands)
    assert want.dtype == want_dtype
    torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.parametrize(
    ("equation", "shapes", "matmuls", "sums"),
    [
        ("ij,jk->ik", [(3, 4), (4, 5)], 1, 0),
        ("bhqd,bhkd->bhqk", [(2, 3, 4, 8), (2, 3, 6, 8)], 1, 0),
        ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)], 2, 0),
        ("ij,jk->i", [(3, 4), (4, 5)], 1, 1),  # k summed first, then one matmul
        ("ij,jk->k", [(3, 4), (4, 5)], 1, 1),
        ("i,j->ij", [(3,), (4,)], 0, 0),  # a broadcast multiply
        ("ij->", [(3, 4)], 0, 1),
    ],
)
def test_contractions_are_matmuls_and_lone_labels_are_summed_first(
    equation: str, shapes: list, matmuls: int, sums: int
) -> None:
    jfn = compiler.jit(lambda *xs: torch.einsum(equation, *xs))
    jfn(*[randn(*s, seed=i) for i, s in enumerate(shapes)])
    syms = prims_of(jfn)
    assert (syms.count(Prim.MATMUL), syms.count(Prim.SUM)) == (matmuls, sums), syms
    if sums and matmuls:
        assert syms.index(Prim.SUM) < syms.index(Prim.MATMUL), syms


def test_attention_scores_are_one_batched_matmul_without_copies() -> None:
    jfn = compiler.jit(lambda q, k: torch.einsum("bhqd,bhkd->bhqk", q, k))
    jfn(randn(2, 3, 4, 8, seed=0), randn(2, 3, 6, 8, seed=1))
    assert prims_of(jfn) == [Prim.PERMUTE, Prim.RESHAPE, Prim.RESHAPE, Prim.MATMUL, Prim.RESHAPE]
    (matmul,) = [b for b in frontend.leaves(compiler.last_traces(jfn)[0].bsyms) if b.sym is Prim.MATMUL]
    assert [tuple(a.shape) for a in matmul.args] == [(6, 4, 8), (6, 8, 6)]


# ---------------------------------------------------------------------------------------------
# einsum: gradients and symbolic sizes


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(
    ("equation", "shapes"),
    [
        ("bhqd,bhkd->bhqk", [(2, 3, 4, 8), (2, 3, 6, 8)]),
        ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
        ("...ij,...jk->...ik", [(5, 1, 2, 3), (4, 3, 6)]),
        ("ii,ij->ij", [(3, 3), (3, 4)]),  # a diagonal, broadcast over j
        ("ij,jk->ik", [(2, 1), (3, 4)]),  # a broadcast size-1 dim
    ],
)
def test_einsum_gradients_match_eager(equation: str, shapes: list, seed: int) -> None:
    operands = [randn(*s, seed=seed + i) for i, s in enumerate(shapes)]
    check_gradients(lambda *xs: torch.einsum(equation, *xs), operands, seed=seed)


def test_einsum_gradients_in_bfloat16() -> None:
    operands = [randn(2, 3, 4, 8, seed=0, dtype=torch.bfloat16), randn(2, 3, 6, 8, seed=1, dtype=torch.bfloat16)]
    check_gradients(lambda q, k: torch.einsum("bhqd,bhkd->bhqk", q, k), operands)


def test_einsum_over_symbolic_sizes_compiles_twice() -> None:
    """Automatic dynamic makes every size symbolic after the first miss; the matmul stays one."""
    fn = lambda q, k: torch.einsum("bhqd,bhkd->bhqk", q, k)
    jfn = compiler.jit(fn)
    for seed, (b, h, q, k, d) in enumerate([(2, 3, 4, 5, 6), (3, 2, 5, 7, 4), (4, 3, 6, 2, 8), (2, 5, 3, 9, 3)]):
        queries, keys = randn(b, h, q, d, seed=seed), randn(b, h, k, d, seed=seed + 10)
        torch.testing.assert_close(jfn(queries, keys), fn(queries, keys))
    assert compiler.cache_stats(jfn).misses == 2
    assert len(compiler.examine.recompilations(jfn)[0].made_symbolic) == 8
    last = str(compiler.last_traces(jfn)[-1])
    assert "prims.matmul(" in last and "q_size2" in last


def test_a_diagonal_over_a_symbolic_size_is_specialised_and_correct() -> None:
    """The diagonal is a strided slice, whose step (n + 1) must be an int: n is guarded."""
    jfn = compiler.jit(lambda x: torch.einsum("ii,ij->j", x, x))
    for n in (3, 4, 5, 6):
        x = randn(n, n, seed=n)
        torch.testing.assert_close(jfn(x), torch.einsum("ii,ij->j", x, x))


# ---------------------------------------------------------------------------------------------
# einsum: errors


def _x(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return randn(*shape, seed=0, dtype=dtype)


EINSUM_ERRORS = [  # (equation, operands, what the message says after "einsum('<equation>'): ")
    ("ij,jk->ik", [_x(2, 3)], "the equation has subscripts for 2 operand(s) but 1 operand(s) were given"),
    ("ij->ij", [_x(2, 3), _x(3, 4)], "the equation has subscripts for 1 operand(s) but 2 operand(s) were given"),
    (
        "ijk,jk->ik",
        [_x(2, 3), _x(3, 4)],
        "operand 0 has 2 dim(s) (shape (2, 3)) but 3 subscript(s); expected one subscript per dim",
    ),
    (
        "...ijk->i",
        [_x(2, 3)],
        "operand 0 has 2 dim(s) (shape (2, 3)) but 3 subscript(s); expected at most as many subscripts as dims",
    ),
    (
        "ij,jk->ik",
        [_x(2, 3), _x(2, 4)],
        "subscript j has size 2 in operand 1 but size 3 in an earlier operand; expected equal sizes (or 1, which "
        "broadcasts)",
    ),
    ("...i,...i->i", [_x(2, 3), _x(4, 3)], "dim 0 of '...' has size 4 in operand 1 but size 2 in an earlier operand"),
    (
        "ii->i",
        [_x(3, 4)],
        "subscript i is repeated in operand 0 over dims of sizes 3 and 4; a diagonal needs equal sizes",
    ),
    ("ij,jk->iz", [_x(2, 3), _x(3, 4)], "output subscript z does not appear in any operand's subscripts"),
    ("ij->ii", [_x(2, 3)], "output subscript i appears more than once"),
    (
        "i1,jk->ik",
        [_x(2, 3), _x(3, 4)],
        "invalid character '1' in the subscripts of operand 0: subscripts are letters a-z and A-Z",
    ),
    ("ij->j,k", [_x(2, 3)], "invalid character ',' in the output's subscripts"),
    ("ij->i->j", [_x(2, 3)], "invalid character '-' in the output's subscripts"),
    ("i.j->j", [_x(2, 3)], "a '.' in the subscripts of operand 0 is not part of '...'"),
    ("...i...->i", [_x(2, 3)], "more than one '...' in the subscripts of operand 0"),
    (
        "ij,jk->ik",
        [_x(2, 3), _x(3, 4, dtype=torch.float64)],
        "operands must share a dtype (torch does not promote in einsum), got torch.float32 (operand 0), "
        "torch.float64 (operand 1)",
    ),
]


@pytest.mark.parametrize(("equation", "operands", "message"), EINSUM_ERRORS, ids=[m[:40] for *_, m in EINSUM_ERRORS])
def test_einsum_errors_name_the_equation_and_the_problem(equation: str, operands: list, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"einsum('{equation}'): {message}")) as info:
        compiler.jit(lambda *xs: torch.einsum(equation, *xs))(*operands)
    assert f"(called at {__file__}:" in str(info.value)


def test_einsum_refuses_operands_that_are_not_tensors_and_bad_sublists() -> None:
    with pytest.raises(TypeError, match=re.escape("einsum('ij,j'): operand 1 must be a tensor, got int")):
        compiler.jit(lambda x: torch.einsum("ij,j", x, 2))(_x(2, 3))
    with pytest.raises(
        ValueError, match=re.escape("einsum: subscript 52 in a sublist is not ... or an int in [0, 52)")
    ):
        compiler.jit(lambda x: torch.einsum(x, [0, 52]))(_x(2, 3))


# ---------------------------------------------------------------------------------------------
# linspace

BOUNDS = [(0, 1), (-1, 1), (1, -1), (-2.5, 7), (10, -10), (0.1, 0.9), (4.3, 50), (-3, 7), (3, 3), (40, -35)]
STEPS = [0, 1, 2, 5, 7, 37, 100]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
@pytest.mark.parametrize(("start", "end"), BOUNDS)
def test_floating_linspace_matches_eager(start: float, end: float, dtype: torch.dtype) -> None:
    """At torch's default (tight) tolerances: eager's kernels compute some elements as the start of
    a vector plus lanes of steps, so float32 and float64 differ in the last bit here and there;
    bf16 rounds the products as eager does (one rounding in float32 would be 1e-5 off near 0)."""
    for steps in STEPS:
        fn = lambda steps=steps: torch.linspace(start, end, steps, dtype=dtype)
        got, want = compiler.jit(fn)(), fn()
        assert got.dtype == want.dtype and got.shape == want.shape
        torch.testing.assert_close(got, want, msg=lambda m, steps=steps: f"steps={steps}: {m}")


INTEGER_CASES = [
    pytest.param(start, end, dtype, id=f"{start}-{end}-{str(dtype)[6:]}")
    for dtype in (torch.int64, torch.int32, torch.uint8)
    for start, end in BOUNDS + [(-3, 7.5), (23, -35), (-7, 49), (0, 255)]
    if dtype != torch.uint8 or min(start, end) >= 0
]


@pytest.mark.parametrize(("start", "end", "dtype"), INTEGER_CASES)
def test_integer_linspace_matches_eager_exactly(start: float, end: float, dtype: torch.dtype) -> None:
    """Eager truncates start and end, computes start + i * step (end - (steps - 1 - i) * step in the
    second half) in float64 rounded once (a fused multiply-add) and truncates: e.g. -3, 7, 37 gives 1
    at i = 18 where rounding the product first gives 2."""
    for steps in STEPS + [1001]:
        fn = lambda steps=steps: torch.linspace(start, end, steps, dtype=dtype)
        got, want = compiler.jit(fn)(), fn()
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want, rtol=0, atol=0, msg=lambda m, steps=steps: f"steps={steps}: {m}")


def test_linspace_defaults_to_the_default_dtype() -> None:
    fn = lambda: torch.linspace(0, 3, 4)
    assert compiler.jit(fn)().dtype == torch.float32
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        got = compiler.jit(lambda: torch.linspace(0, 3, 4))()
    finally:
        torch.set_default_dtype(previous)
    assert got.dtype == torch.float64


def _scaled(x: torch.Tensor) -> torch.Tensor:
    return x * torch.linspace(0, 1, x.shape[-1], device=x.device)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_linspace_in_a_program_with_an_input(dtype: torch.dtype) -> None:
    """steps from an input's size, which automatic dynamic makes symbolic after the first size."""
    jfn = compiler.jit(_scaled)
    for n in (5, 7, 1, 64):
        x = randn(3, n, seed=n, dtype=dtype)
        torch.testing.assert_close(jfn(x), _scaled(x))


def test_linspace_over_a_symbolic_steps() -> None:
    """torch.linspace is routed past eager's argument parser (patches._number_parameters, as
    torch.arange is), so steps stays symbolic: one entry for every count but 1 (guarded: a single
    point is `start`)."""
    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        fn = lambda n, dtype=dtype: torch.linspace(-3, 7.5, n, dtype=dtype)
        jfn = compiler.jit(fn, numbers="symbolic")
        for n in (5, 7, 37, 0, 2, 100, 1, 4):
            tolerance = {} if dtype.is_floating_point else {"rtol": 0, "atol": 0}
            torch.testing.assert_close(jfn(n), fn(n), **tolerance)
        assert compiler.cache_stats(jfn).misses == 2, dtype
    scaled = compiler.jit(_scaled)
    for n in (5, 7, 9, 64):
        x = randn(3, n, seed=n)
        torch.testing.assert_close(scaled(x), _scaled(x))
    assert compiler.cache_stats(scaled).misses == 2


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_linspace_from_0d_tensor_bounds(dtype: torch.dtype) -> None:
    """Tensor bounds are rounded to the dtype as eager rounds their values (-2.7 truncates to -2)."""
    tolerance = {} if dtype.is_floating_point else {"rtol": 0, "atol": 0}
    bounds = [(torch.tensor(-2.7), torch.tensor(4)), (torch.tensor(5), torch.tensor(-1.5, dtype=torch.float64))]
    for steps in (0, 1, 2, 9, 37):
        fn = lambda start, end, steps=steps: torch.linspace(start, end, steps, dtype=dtype)
        for start, end in bounds:
            torch.testing.assert_close(compiler.jit(fn)(start, end), fn(start, end), **tolerance)


LINSPACE_ERRORS = [
    (lambda: torch.linspace(0, 1, -1), ValueError, "torch.linspace: steps must be a non-negative int, got -1"),
    (
        lambda: torch.linspace(0, 1, 5, dtype=torch.bool),
        NotImplementedError,
        "torch.linspace: dtype torch.bool is not supported",
    ),
    (
        lambda: torch.linspace(0, 1, 5, dtype=torch.complex64),
        NotImplementedError,
        "torch.linspace: dtype torch.complex64 is not supported",
    ),
    (lambda: torch.linspace(1j, 2, 5), NotImplementedError, "torch.linspace: complex bounds are not supported"),
    (
        lambda: torch.linspace(0, 300, 5, dtype=torch.uint8),
        ValueError,
        "torch.linspace: end 300 cannot be converted to torch.uint8 without overflow",
    ),
    (
        lambda: torch.linspace(-1e40, 1, 5),
        ValueError,
        "torch.linspace: start -1e+40 cannot be converted to torch.float32 without overflow",
    ),
]


@pytest.mark.parametrize(("fn", "error", "message"), LINSPACE_ERRORS, ids=[m[16:50] for *_, m in LINSPACE_ERRORS])
def test_linspace_errors(fn: Callable, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=re.escape(message)):
        compiler.jit(fn)()


def test_linspace_refuses_a_tensor_bound_that_is_not_0d() -> None:
    with pytest.raises(ValueError, match=re.escape("torch.linspace: a tensor end must be 0-d, got shape (1,)")):
        compiler.jit(lambda end: torch.linspace(0, end, 3))(torch.ones(1))


def test_linspace_outside_tracing_stays_eagers() -> None:
    """Input construction (suites/host_overhead.py) calls torch.linspace outside any trace."""
    from suites.host_overhead import _tiny_inputs

    compiler.jit(lambda: torch.linspace(-1.0, 1.0, 4))()
    (x,) = _tiny_inputs({"numel": 4}, torch.device("cpu"), 0)
    assert type(x) is torch.Tensor
    torch.testing.assert_close(x, torch.tensor([-1.0, -1 / 3, 1 / 3, 1.0]))
