"""update_fresh: slices written into temporaries nothing reads afterwards, in place; and the
autodiff's chain of a chunk's slice gradients that it turns into such writes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import compiler
from compiler.passes.update_fresh import FRESH
from compiler.prims import Prim
from tests.support.autodiff_util import check_gradients
from tests.support.nvfuser_helpers import fake_nvfuser  # noqa: F401 - a fixture
from tests.support.nvfuser_helpers import printed_ops as _ops


def halves_into_zeros(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    z = torch.zeros(a.shape[0], a.shape[1] + b.shape[1], dtype=a.dtype)
    z[:, : a.shape[1]] = a
    z[:, a.shape[1] :] = b
    return z * 2


def read_again(a: torch.Tensor, index: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    y = a * 2
    w = y.index_copy(0, index, src)
    return w + y  # y is read after the update: its memory must keep its values


def written_into_its_result(x: torch.Tensor) -> torch.Tensor:
    y = x * 2
    y[:, 0] = 0  # a program's own write into a tensor it computed
    return y.exp()


def rotary(q: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    first, second = q.chunk(2, dim=-1)
    return q * cos + torch.cat((-second, first), dim=-1) * sin


def three_pieces(x: torch.Tensor) -> torch.Tensor:
    _, b, c = x.split([1, 2, 3], dim=1)  # b and c each read alone, the whole read too
    return x.sin() + b.exp().sum() + (c * 3).sum()


def test_writes_into_zeros_are_done_in_their_memory():
    a, b = torch.randn(3, 2), torch.randn(3, 4)
    jfn = compiler.jit(halves_into_zeros, executors=["torch"])
    torch.testing.assert_close(jfn(a, b), halves_into_zeros(a, b))
    ops = _ops(compiler.last_traces(jfn)[-1])
    assert ops.count("slice_update_fresh") == 2 and "prims.slice_update" not in ops, ops


def test_a_temporary_read_after_the_update_keeps_its_copy():
    a, index, src = torch.randn(4, 3), torch.tensor([2, 0]), torch.randn(2, 3)
    jfn = compiler.jit(read_again, executors=["torch"])
    torch.testing.assert_close(jfn(a, index, src), read_again(a, index, src))
    ops = _ops(compiler.last_traces(jfn)[-1])
    assert "prims.index_copy" in ops and "index_copy_fresh" not in ops, ops


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])  # bf16: a region ends in a conversion
@pytest.mark.parametrize("executors", [["torch"], ["nvfuser", "torch"]])
def test_a_write_into_a_computed_tensor_is_done_in_its_memory(executors, dtype, fake_nvfuser):  # noqa: F811
    x = torch.randn(3, 4, dtype=dtype)
    jfn = compiler.jit(written_into_its_result, executors=executors, fusion={"min_region_size": 1})
    torch.testing.assert_close(jfn(x), written_into_its_result(x))
    ops = _ops(compiler.last_traces(jfn)[-1])
    assert "slice_update_fresh" in ops and "prims.slice_update" not in ops, ops


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_conversion_is_new_memory_only_when_the_dtype_changes(dtype):
    def write_converted(x: torch.Tensor) -> torch.Tensor:
        y = x.to(torch.float32)  # x itself when x is float32: the write then goes into x
        y[:, 0] = 0
        return y

    x = torch.randn(3, 4, dtype=dtype)
    eager_x = x.clone()
    jfn = compiler.jit(write_converted, executors=["torch"])
    torch.testing.assert_close(jfn(x), write_converted(eager_x))
    torch.testing.assert_close(x, eager_x)
    assert ("slice_update_fresh" in _ops(compiler.last_traces(jfn)[-1])) == (dtype is torch.float64)


def test_an_input_is_never_written_in_its_memory():
    def update_copy(x: torch.Tensor, index: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return x.index_copy(0, index, v)

    x, index, v = torch.randn(3, 4), torch.tensor([1]), torch.randn(1, 4)
    before = x.clone()
    jfn = compiler.jit(update_copy, executors=["torch"])
    torch.testing.assert_close(jfn(x, index, v), update_copy(before, index, v))
    torch.testing.assert_close(x, before)
    assert "index_copy_fresh" not in _ops(compiler.last_traces(jfn)[-1])


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("shape", [(2, 3, 5, 8), (1, 1, 1, 4), (2, 1, 4, 6)])
def test_rotary_backward_joins_its_halves_with_one_cat_and_matches_eager(seed, shape):
    g = torch.Generator().manual_seed(seed)
    b, h, s, d = shape
    q = torch.randn(b, s, h, d, generator=g).transpose(1, 2)  # [b, h, s, d], not contiguous
    cos, sin = torch.randn(shape[-2:], generator=g), torch.randn(shape[-2:], generator=g)
    check_gradients(rotary, (q, cos, sin), seed=seed)
    jfn = compiler.jit(rotary, executors=["torch"])
    jfn(q.clone().requires_grad_(), cos, sin).sum().backward()
    ops = _ops(compiler.last_backward_traces(jfn)[-1])
    # the halves' gradients tile the last dim: one cat, no zeros written into, plus q * cos's term
    assert ops.count("prims.cat") == 1 and "prims.full" not in ops, ops
    assert not any("slice_update" in op for op in ops), ops


def test_rotary_backward_in_bf16_through_fused_regions(fake_nvfuser):  # noqa: F811
    q = torch.randn(2, 4, 6, 8, dtype=torch.bfloat16)
    cos, sin = torch.randn(6, 8, dtype=torch.bfloat16), torch.randn(6, 8, dtype=torch.bfloat16)
    jfn = compiler.jit(rotary, executors=["nvfuser", "torch"])
    got_q = q.clone().requires_grad_()
    want_q, exact_q = q.clone().requires_grad_(), q.double().requires_grad_()
    grad = torch.randn(2, 4, 6, 8, dtype=torch.bfloat16)
    jfn(got_q, cos, sin).backward(grad)
    rotary(want_q, cos, sin).backward(grad)
    rotary(exact_q, cos.double(), sin.double()).backward(grad.double())
    # one fusion rounds once to bf16 where eager rounds each op: at least as close to float64
    got_error, eager_error = ((t.grad.double() - exact_q.grad).abs().max() for t in (got_q, want_q))
    assert got_error <= eager_error, (got_error, eager_error)
    torch.testing.assert_close(got_q.grad, want_q.grad, atol=eager_error.item() * 2, rtol=1.6e-2)
    ops = _ops(compiler.last_backward_traces(jfn)[-1])
    assert ops == ["nvFusion0"], ops  # the whole backward, the halves' cat included, in one fusion


def embedding_bag(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    return F.embedding(ids, table).tanh().sum(1)


def scatter_rows(x: torch.Tensor, index: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    return x.scatter(1, index, src).exp()


@pytest.mark.parametrize("seed", [0, 1])
def test_an_embedding_gradient_is_added_into_its_zeros_in_place(seed):
    g = torch.Generator().manual_seed(seed)
    table, ids = torch.randn(11, 6, generator=g), torch.randint(0, 11, (4, 5), generator=g)
    check_gradients(embedding_bag, (table, ids), [True, False], seed=seed)
    jfn = compiler.jit(embedding_bag, executors=["torch"])
    jfn(table.clone().requires_grad_(), ids).sum().backward()
    ops = _ops(compiler.last_backward_traces(jfn)[-1])
    assert "index_add_fresh" in ops and "prims.index_add" not in ops, ops


@pytest.mark.parametrize("seed", [0, 1])
def test_a_scatter_gradient_matches_eager(seed):
    g = torch.Generator().manual_seed(seed)
    x, src = torch.randn(3, 8, generator=g), torch.randn(3, 2, generator=g)
    index = torch.stack([torch.randperm(8, generator=g)[:2] for _ in range(3)])
    check_gradients(scatter_rows, (x, index, src), [True, False, True], seed=seed)


def test_split_pieces_read_alone_chain_and_match_eager():
    x = torch.randn(2, 6)
    check_gradients(three_pieces, (x,), seed=0)
    jfn = compiler.jit(three_pieces, executors=["torch"])
    jfn(x.clone().requires_grad_()).sum().backward()
    ops = _ops(compiler.last_backward_traces(jfn)[-1])
    # the two pieces leave the first column out (no cat): written one after the other into one zeros
    assert ops.count("prims.full") == 1 and ops.count("slice_update_fresh") == 2, ops


def test_an_expanded_buffer_is_copied_before_the_write():
    buf = torch.zeros(1, 4).expand(3, 4)
    out = FRESH[Prim.SLICE_UPDATE].impl(buf, torch.ones(3, 2), [0, 0], [3, 2], [1, 1])
    torch.testing.assert_close(out, torch.tensor([[1.0, 1, 0, 0]] * 3))
    assert buf.sum() == 0


@pytest.mark.nvfuser
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_on_real_nvfuser_region_results_are_written_in_place_and_match_eager(dtype):
    x = torch.randn(64, 48, device="cuda", dtype=dtype)
    jfn = compiler.jit(written_into_its_result, executors=["nvfuser", "torch"], fallback=False)
    torch.testing.assert_close(jfn(x), written_into_its_result(x))
    assert "slice_update_fresh" in _ops(compiler.last_traces(jfn)[-1])
    q = torch.randn(2, 64, 4, 32, device="cuda", dtype=dtype).transpose(1, 2)
    cos, sin = (torch.randn(64, 32, device="cuda", dtype=dtype) for _ in range(2))
    grad = torch.randn(2, 4, 64, 32, device="cuda", dtype=dtype)
    got_q, want_q = q.clone().requires_grad_(), q.float().requires_grad_()  # the reference in float32
    jrotary = compiler.jit(rotary, executors=["nvfuser", "torch"], fallback=False)
    jrotary(got_q, cos, sin).backward(grad)
    rotary(want_q, cos.float(), sin.float()).backward(grad.float())
    tolerance = {"atol": 5e-2, "rtol": 2e-2} if dtype is torch.bfloat16 else {}
    torch.testing.assert_close(got_q.grad.float(), want_q.grad, **tolerance)
    assert _ops(compiler.last_backward_traces(jrotary)[-1]) == ["nvFusion0"]


def column_scaled_in_place(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    h = x * 2
    h[:, 0] *= y[:, 0]  # the backward reads h's old column, which the region returns as a view of h
    return h


def test_a_buffer_whose_region_returns_a_view_of_it_beside_keeps_its_copy():
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    jfn = compiler.jit(column_scaled_in_place, executors=["nvfuser", "torch"], fusion={"runner": "torch"})
    eager = [t.clone().requires_grad_() for t in (x, y)]
    jitted = [t.clone().requires_grad_() for t in (x, y)]
    expected, actual = column_scaled_in_place(*eager), jfn(*jitted)
    torch.testing.assert_close(actual, expected)
    cotangent = torch.randn(3, 4)
    for got, want in zip(
        torch.autograd.grad(actual, jitted, cotangent), torch.autograd.grad(expected, eager, cotangent)
    ):
        torch.testing.assert_close(got, want)
    assert "prims.slice_update" in _ops(compiler.last_traces(jfn)[-1])
