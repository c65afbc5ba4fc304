"""The scatters beyond the op table (opinfo_scatter.py): gradients against eager autograd over 3 seeds
in float32 and bfloat16 (every scatter_reduce mode, with and without self, with repeated positions,
ties and zeros), src's gradient where src is larger than the index, in-place scatters on inputs, the
prims left to torch in a fusion, and the errors that name what is wrong."""

from __future__ import annotations

import pytest
import torch

import compiler
from compiler.prims import Prim
from tests.support.autodiff_util import check_gradients
from tests.support.eager_match import assert_matches_eager
from tests.support.opinfo.scatter import REDUCTIONS, unique_index

DTYPES = [torch.float32, torch.bfloat16]
SEEDS = range(3)


def _inputs(dtype: torch.dtype, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(4, 3, 5, generator=generator).to(dtype)
    index = torch.randint(0, 5, (4, 3, 7), generator=generator)  # repeated positions along dim 2
    src = torch.randn(4, 3, 7, generator=generator).to(dtype)
    return x, index, src


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_scatter_and_scatter_add_gradients(dtype: torch.dtype) -> None:
    for seed in SEEDS:
        x, index, src = _inputs(dtype, seed)
        torch.manual_seed(seed)
        unique = unique_index(5, (4, 3, 2), 2)
        check_gradients(lambda x, i, s: torch.scatter(x, -1, i, s[..., :2]).sin(), [x, unique, src], seed=seed)
        check_gradients(lambda x, i: x.scatter(2, i, 1.5) * x, [x, unique], seed=seed)
        check_gradients(lambda x, i, s: torch.scatter_add(x, 2, i, s).tanh(), [x, index, src], seed=seed)
        check_gradients(
            lambda x, i, s: x.scatter_add(0, i[:2, :, :5], s[:2, :, :5] * 2), [x, index % 4, src], seed=seed
        )


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", REDUCTIONS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_scatter_reduce_gradients(dtype: torch.dtype, reduce: str, include_self: bool) -> None:
    for seed in SEEDS:
        x, index, src = _inputs(dtype, seed)
        if reduce == "prod":  # a zero of self, a position with one zero of src, one with two
            x[0, 0, 1] = 0
            src[1, 1, :] = torch.tensor([0, 1.5, -0.5, 2, 0, 1, 3], dtype=dtype)
            index[1, 1, :] = torch.tensor([0, 0, 0, 2, 2, 3, 2])
        if reduce in ("amax", "amin") and include_self:  # ties between self and src, and among src
            src[0, 0, :3] = src[0, 0, 3] = x[0, 0, 2]
            index[0, 0, :4] = 2
        check_gradients(
            lambda x, i, s: torch.scatter_reduce(x, 2, i, s, reduce, include_self=include_self).sin(),
            [x, index, src],
            seed=seed,
        )


def test_amax_without_self_gives_a_unique_src_maximum_all_the_gradient() -> None:
    # NOTE: self equals the result at the written position but takes no part; eager (2.13) counts it
    # as a tie and gives src 0.5 (FunctionsManual.cpp's scatter_reduce_backward), the derivative is 1.
    x, src, index = torch.tensor([3.0, 1.0]), torch.tensor([3.0, 2.0]), torch.tensor([0, 0])
    fn = compiler.jit(lambda x, s, i: torch.scatter_reduce(x, 0, i, s, "amax", include_self=False))
    s = src.clone().requires_grad_()
    out = fn(x, s, index)
    out.backward(torch.ones(2))
    assert out.tolist() == [3.0, 1.0] and s.grad.tolist() == [1.0, 0.0]


def test_src_larger_than_the_index_gets_zero_gradient_outside_it() -> None:
    # NOTE: eager's backward raises here (the gather of the gradient has the index's shape).
    x, src = torch.randn(4, 5), torch.randn(6, 7)
    index = torch.randint(0, 4, (3, 5))
    for op in (torch.scatter_add, lambda x, d, i, s: torch.scatter_reduce(x, d, i, s, "mean")):
        s = src.clone().requires_grad_()
        compiler.jit(op)(x, 0, index, s).sin().sum().backward()
        cut = src[:3, :5].clone().requires_grad_()
        op(x, 0, index, cut).sin().sum().backward()
        expected = torch.zeros(6, 7)
        expected[:3, :5] = cut.grad
        torch.testing.assert_close(s.grad, expected)


def _scatter_into_argument(x: torch.Tensor, index: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    x.scatter_(1, index, src)
    x[1:].scatter_add_(0, index[:2] % 3, src[:2])  # through a view
    x.scatter_reduce_(1, index, src * 2, "amin", include_self=False)
    return x.sum(1)


def test_inplace_scatters_write_into_the_caller_tensor() -> None:
    torch.manual_seed(0)
    x, src = torch.randn(4, 6), torch.randn(4, 3)
    index = unique_index(6, (4, 3), 1)
    expected_x = x.clone()
    expected = _scatter_into_argument(expected_x, index, src)
    got = compiler.jit(_scatter_into_argument)(x, index, src)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(x, expected_x)


def test_scatters_run_in_torch_between_fusions() -> None:
    jfn = compiler.jit(
        lambda x, i, s: torch.scatter_reduce(x.exp(), 1, i, s * 2, "amax").sin() + 1,
        executors=["nvfuser"],
        fusion={"runner": "torch"},
    )
    x, s, index = torch.randn(3, 5), torch.randn(3, 4), torch.randint(0, 5, (3, 4))
    torch.testing.assert_close(jfn(x, index, s), torch.scatter_reduce(x.exp(), 1, index, s * 2, "amax").sin() + 1)
    trace = compiler.last_traces(jfn)[-1]
    names = [b.sym if isinstance(b.sym, Prim) else b.sym.name for b in trace.bsyms]
    # in x.exp()'s own memory: nothing reads it afterwards (passes/update_fresh.py)
    assert names == ["nvFusion0", "scatter_reduce_fresh", "nvFusion1"], trace


ERRORS = [
    ("src dtype", lambda x, i: x.scatter(1, i, x.double()), TypeError, ["src", "torch.float32"]),
    ("float index", lambda x, i: x.scatter_add(1, i.float(), x), TypeError, ["int64"]),
    ("index rank", lambda x, i: x.scatter(1, i[0], x), ValueError, ["rank 1", "(2)"]),
    ("index too large", lambda x, i: x.scatter(0, torch.cat([i, i]), x), ValueError, ["(6, 4)", "(3, 4)"]),
    ("src too small", lambda x, i: x.scatter_add(1, i, x[:, :2]), ValueError, ["(3, 4)", "(3, 2)"]),
    ("reduce", lambda x, i: x.scatter_reduce(1, i, x, "add"), ValueError, ["'add'", "amax"]),
    ("legacy reduce", lambda x, i: x.scatter(1, i, x, reduce="mean"), ValueError, ["'add' or 'multiply'"]),
]


@pytest.mark.parametrize(("fn", "error", "parts"), [pytest.param(*e[1:], id=e[0]) for e in ERRORS])
def test_bad_scatters_raise_naming_what_is_wrong(fn, error: type[Exception], parts: list[str]) -> None:
    x, index = torch.randn(3, 4), torch.randint(0, 3, (3, 4))
    with pytest.raises(RuntimeError):
        fn(x, index)  # eager rejects it too
    with pytest.raises(error) as info:
        compiler.jit(fn)(x, index)
    assert all(part in str(info.value) for part in parts), str(info.value)
    assert f"{__file__}:" in str(info.value)


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_index_reduce_matches_eager(reduce: str, include_self: bool, dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(0)
    x, source, index = (
        torch.randn(5, 3, generator=g).to(dtype),
        torch.randn(4, 3, generator=g).to(dtype),
        torch.tensor([0, 2, 2, 4]),
    )
    fn = lambda x, s: (
        x.index_reduce(0, index, s, reduce, include_self=include_self),
        torch.index_reduce(x.mT, 1, index, s.mT, reduce, include_self=include_self),
    )
    assert_matches_eager(fn, x, source)


def test_index_reduce_of_integers_in_place_and_errors() -> None:
    x, source, index = torch.arange(10).reshape(5, 2), torch.arange(6).reshape(3, 2) - 2, torch.tensor([4, 0, 4])
    for reduce in ("prod", "mean", "amax", "amin"):
        fn = lambda x, s, reduce=reduce: x.index_reduce(0, index, s, reduce)
        assert torch.equal(compiler.jit(fn)(x, source), fn(x, source))
    y = x.clone()
    compiler.jit(lambda y, s: y.index_reduce_(0, index, s, "amax"))(y, source)
    assert torch.equal(y, x.index_reduce(0, index, source, "amax"))
    with pytest.raises(RuntimeError, match="Expected reduce to be one of prod, mean, amax or amin"):
        compiler.jit(lambda x, s: x.index_reduce(0, index, s, "sum"))(x, source)
