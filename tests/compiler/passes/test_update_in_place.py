"""update_in_place: KV-cache style partial updates of written-back inputs run in place, safely."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import compiler
from compiler import prims
from compiler.core.ir import TensorProxy, Trace, TraceContext, tracing
from compiler.passes import update_in_place as update_in_place_module
from compiler.passes.update_in_place import _index_copy_, update_in_place, wide_rows
from compiler.prims import Prim
from compiler.tracing.check_trace import check_trace
from compiler.tracing.interpreter import eval_trace
from tests.support.nvfuser_helpers import fake_nvfuser, printed_ops  # noqa: F401 - a fixture


def kv_step(q, k_cache, v_cache, idx, k_new, v_new):
    k_cache.index_copy_(2, idx, k_new)
    v_cache.index_copy_(2, idx, v_new)
    return F.scaled_dot_product_attention(q, k_cache, v_cache)


def kv_step_slices(q, k_cache, v_cache, pos, k_new, v_new):
    n = k_new.size(2)
    k_cache[:, :, pos : pos + n] = k_new
    v_cache[:, :, pos : pos + n] = v_new
    return F.scaled_dot_product_attention(q, k_cache, v_cache, is_causal=False)


def _kv_inputs(position):
    torch.manual_seed(0)
    q = torch.randn(2, 4, 3, 8)
    caches = torch.randn(2, 4, 16, 8), torch.randn(2, 4, 16, 8)
    new = torch.randn(2, 4, 3, 8), torch.randn(2, 4, 3, 8)
    return q, caches, position, new


def _final_ops(jfn) -> list[str]:
    return printed_ops(compiler.last_traces(jfn)[-1])


def test_index_copy_into_a_written_cache_runs_in_place_and_matches_eager() -> None:
    for numbers in ("constant", "symbolic"):
        jfn = compiler.jit(kv_step, numbers=numbers)
        for step in range(3):
            q, (kc, vc), idx, (kn, vn) = _kv_inputs(torch.tensor([step, step + 5, step + 9]))
            k_eager, v_eager = kc.clone(), vc.clone()
            out = jfn(q, kc, vc, idx, kn, vn)
            torch.testing.assert_close(out, kv_step(q, k_eager, v_eager, idx, kn, vn))
            torch.testing.assert_close((kc, vc), (k_eager, v_eager))
        ops = _final_ops(jfn)
        assert ops.count("index_copy_") == 2 and "prims.copy_to" not in ops, ops
        check_trace(compiler.last_traces(jfn)[-1])


def test_slice_assignment_into_a_written_cache_runs_in_place_for_every_position() -> None:
    jfn = compiler.jit(kv_step_slices, numbers="symbolic")
    for pos in (0, 4, 13):
        q, (kc, vc), _, (kn, vn) = _kv_inputs(pos)
        k_eager, v_eager = kc.clone(), vc.clone()
        torch.testing.assert_close(jfn(q, kc, vc, pos, kn, vn), kv_step_slices(q, k_eager, v_eager, pos, kn, vn))
        torch.testing.assert_close((kc, vc), (k_eager, v_eager))
    assert compiler.cache_stats(jfn).misses == 1
    ops = _final_ops(jfn)
    assert ops.count("slice_update_") == 2 and "prims.copy_to" not in ops, ops


def test_an_update_stays_out_of_place_when_the_old_buffer_is_read_afterwards() -> None:
    buf = TensorProxy((4, 3), torch.float32, torch.device("cpu"), name="buf")
    idx = TensorProxy((1,), torch.int64, torch.device("cpu"), name="idx")
    src = TensorProxy((1, 3), torch.float32, torch.device("cpu"), name="src")
    with tracing(TraceContext({"buf", "idx", "src"})) as context:
        updated = prims.index_copy(buf, 0, idx, src)
        old_sum = prims.sum(buf, (0, 1))  # reads buf's old values after the update is computed
        prims.copy_to(updated, buf)
    trace = Trace((buf, idx, src), list(context.bsyms), old_sum)
    after = update_in_place(trace)
    assert [b.sym for b in after.bsyms] == [Prim.INDEX_COPY, Prim.SUM, Prim.COPY_TO]
    values = torch.randn(4, 3), torch.tensor([2]), torch.randn(1, 3)
    expected_sum = values[0].sum()
    torch.testing.assert_close(eval_trace(after, *values), expected_sum)


def _copy_an_updated_input(x0: torch.Tensor) -> torch.Tensor:
    x1 = x0.sin()
    x0[1:] = 1.5
    x1.copy_(x0)  # x1 holds x0's new values in memory of its own
    return x1


def test_an_update_whose_value_is_returned_stays_out_of_place() -> None:
    # in place, the returned x1 would be x0's memory: a write into one would reach the other
    # (found by test_inplace_property)
    jfn = compiler.jit(_copy_an_updated_input)
    x = torch.randn(4, 6)
    eager_x, jit_x = x.clone(), x.clone()
    expected, actual = _copy_an_updated_input(eager_x), jfn(jit_x)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(jit_x, eager_x)
    assert actual.untyped_storage().data_ptr() != jit_x.untyped_storage().data_ptr()
    assert "slice_update_" not in _final_ops(jfn)


def test_a_functional_update_that_is_not_written_back_is_left_alone() -> None:
    def f(cache, idx, src):
        return cache.index_copy(0, idx, src) * 2

    jfn = compiler.jit(f)
    cache, idx, src = torch.randn(5, 2), torch.tensor([1]), torch.randn(1, 2)
    before = cache.clone()
    torch.testing.assert_close(jfn(cache, idx, src), f(cache, idx, src))
    assert torch.equal(cache, before)
    assert "index_copy_" not in _final_ops(jfn)


def _copy_a_view_onto_itself(x0: torch.Tensor, x2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x2.add_(x0, alpha=-0.5)
    x3 = x0[None, ..., :2]
    x3.copy_(x3)
    return x0, x2


def test_an_update_whose_value_is_a_view_of_the_buffer_stays_out_of_place() -> None:
    # Found by test_inplace_property: the in-place form of `x3.copy_(x3)` wrote x0 from a view of
    # x0 itself (slice, broadcast, reshape), which torch's indexed assignment refuses.
    jfn = compiler.jit(_copy_a_view_onto_itself)
    for seed in range(3):
        gen = torch.Generator().manual_seed(seed)
        x0, x2 = torch.randn(1, 6, generator=gen), torch.randn(4, 6, generator=gen)
        want = _copy_a_view_onto_itself(x0.clone(), x2.clone())
        torch.testing.assert_close(jfn(x0, x2), want)
        torch.testing.assert_close((x0, x2), want)
    assert "slice_update_" not in _final_ops(jfn)


def _index_copy_case(shape, dim, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    buf = (torch.randn(shape, generator=gen) * 100).to(dtype)
    index = torch.randperm(shape[dim], generator=gen)[: max(1, shape[dim] // 2)]
    source_shape = list(shape)
    source_shape[dim] = len(index)
    source = (torch.randn(source_shape, generator=gen) * 100).to(dtype)
    return buf, index, source


@pytest.fixture(params=["wide rows from 0 bytes", "wide rows from the default size"])
def wide_from(request, monkeypatch) -> int:
    """Runs a test with every source taking the wide path where the layout allows, then with the
    default size limit (these small sources then take plain index_copy_)."""
    if request.param == "wide rows from 0 bytes":
        monkeypatch.setattr(update_in_place_module, "WIDE_MIN_BYTES", 0)
    return update_in_place_module.WIDE_MIN_BYTES


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.int8, torch.bool, torch.float64])
@pytest.mark.parametrize(
    "shape, dim", [((2, 3, 16, 8), 2), ((2, 3, 16, 8), 0), ((4, 6, 5), 1), ((5, 7), 0), ((3, 4, 1, 16), 1), ((6, 3), 1)]
)
def test_the_in_place_index_copy_writes_what_index_copy_writes(shape, dim, dtype, seed, wide_from) -> None:
    buf, index, source = _index_copy_case(shape, dim, dtype, seed)
    expected = buf.clone().index_copy_(dim, index, source)
    assert _index_copy_(buf, dim, index, source) is buf
    torch.testing.assert_close(buf, expected, rtol=0, atol=0)


def test_a_source_under_the_size_limit_is_copied_without_looking_for_wide_rows(monkeypatch) -> None:
    def refuse(*args):
        raise AssertionError("wide_rows was consulted for a small source")

    monkeypatch.setattr(update_in_place_module, "wide_rows", refuse)
    buf, index, source = _index_copy_case((2, 3, 16, 8), 2, torch.bfloat16, 0)
    expected = buf.clone().index_copy_(2, index, source)
    torch.testing.assert_close(_index_copy_(buf, 2, index, source), expected, rtol=0, atol=0)
    monkeypatch.setattr(update_in_place_module, "WIDE_MIN_BYTES", source.nbytes)
    with pytest.raises(AssertionError, match="consulted"):
        _index_copy_(buf, 2, index, source)


def test_index_copy_moves_rows_as_wide_elements_only_where_the_layout_allows(monkeypatch) -> None:
    monkeypatch.setattr(update_in_place_module, "WIDE_MIN_BYTES", 0)
    buf, index, source = _index_copy_case((2, 3, 16, 8), 2, torch.bfloat16, 0)  # rows of 16 bytes
    assert [t.dtype for t in wide_rows(buf, 2, source)] == [torch.complex128] * 2
    assert wide_rows(buf, 3, source) is None  # the last dim: one element per index
    assert wide_rows(buf.transpose(0, 3), 1, source.transpose(0, 3)) is None  # not contiguous after dim
    odd, _, odd_source = _index_copy_case((4, 6, 6), 1, torch.float16, 0)  # rows of 12 bytes: 3 of 4
    assert [t.dtype for t in wide_rows(odd, 1, odd_source)] == [torch.int32] * 2
    assert wide_rows(odd[:, :, 1:], 1, odd_source[:, :, 1:]) is None  # rows of 10 bytes
    f32, _, f32_source = _index_copy_case((4, 6, 3), 1, torch.float32, 0)
    assert wide_rows(f32, 1, f32_source) is None  # rows of 12 bytes: no wider element divides them
    # an offset view of the cache: the address is no longer 16-byte aligned, 8 bytes still are
    base = torch.zeros(4 + 2 * 3 * 16 * 8, dtype=torch.float16)
    shifted = base[4:].view(2, 3, 16, 8)
    assert [t.dtype for t in wide_rows(shifted, 2, source.to(torch.float16))] == [torch.int64] * 2
    expected = shifted.clone().index_copy_(2, index, source.to(torch.float16))
    _index_copy_(shifted, 2, index, source.to(torch.float16))
    torch.testing.assert_close(shifted, expected, rtol=0, atol=0)


@pytest.mark.parametrize("shape, dim", [((), 0), ((5,), 0), ((5,), -1)])
def test_index_copy_of_a_scalar_or_a_vector_is_index_copy(shape, dim) -> None:
    buf = torch.arange(5.0)[: shape[0]] if shape else torch.tensor(3.0)
    index = torch.tensor([0]) if shape else torch.tensor(0)
    source = torch.tensor([7.0]) if shape else torch.tensor(9.0)
    assert wide_rows(buf, dim, source) is None
    expected = buf.clone().index_copy_(dim, index, source)
    torch.testing.assert_close(_index_copy_(buf, dim, index, source), expected)


def scatter_rows(buf: torch.Tensor, index: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    buf.scatter_(1, index, src)
    return buf.sum(1)


def scatter_add_rows(buf: torch.Tensor, index: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    buf.scatter_reduce_(1, index, src, "sum", include_self=True)
    return buf.amax(1)


@pytest.mark.parametrize(("fn", "op"), [(scatter_rows, "torch.Tensor.scatter_"), (scatter_add_rows, "scatter_reduce_")])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_scatter_into_a_written_back_buffer_runs_in_place_and_matches_eager(fn, op, seed) -> None:
    gen = torch.Generator().manual_seed(seed)
    jfn = compiler.jit(fn)
    for rows in (1, 4):
        buf = torch.randn(rows, 8, generator=gen)
        index = torch.stack([torch.randperm(8, generator=gen)[:3] for _ in range(rows)])
        src = torch.randn(rows, 3, generator=gen)
        buf_eager = buf.clone()
        address = buf.data_ptr()
        torch.testing.assert_close(jfn(buf, index, src), fn(buf_eager, index, src))
        torch.testing.assert_close(buf, buf_eager)
        assert buf.data_ptr() == address
    ops = _final_ops(jfn)
    assert op in ops and "prims.copy_to" not in ops, ops


def _scaled_into_cache(cache, k_new, pos):
    cache[:, pos : pos + k_new.shape[1]] = k_new * 0.5  # the new rows are computed by a region


def _into_an_expanded_argument(a0, a1):
    a1[1:].add_(1.5)  # a1 expanded: its two elements are one memory location
    return a0.neg()


def _beside_a_constant_write(a0, a1):
    a0[1:].copy_(1.5)  # the constant is made by the same region as a1's new value, and read after it
    a1[1:].add_(1.5)
    return a0 * 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])  # bf16: computed in fp32, converted back
@pytest.mark.parametrize("runner", ["torch", "nvfuser"])
def test_a_value_a_fusion_computes_is_written_into_the_slice_in_place(runner, dtype, fake_nvfuser) -> None:  # noqa: F811
    # a region's computed outputs are memory of their own: the write needs no copy of the whole buffer
    jfn = compiler.jit(_scaled_into_cache, executors=["nvfuser", "torch"], fusion={"runner": runner})
    for seed, pos in enumerate([0, 3, 5]):
        gen = torch.Generator().manual_seed(seed)
        cache, k_new = torch.randn(2, 8, 4, generator=gen).to(dtype), torch.randn(2, 3, 4, generator=gen).to(dtype)
        expected = cache.clone()
        _scaled_into_cache(expected, k_new, pos)
        jfn(cache, k_new, pos)
        torch.testing.assert_close(cache, expected)
    ops = _final_ops(jfn)
    assert "slice_update_" in ops and "prims.copy_to" not in ops, ops
    # written through a slice of an expanded argument, as eager allows (a whole copy-back would not be)
    for fn in (_into_an_expanded_argument, _beside_a_constant_write):
        jfn = compiler.jit(fn, executors=["nvfuser", "torch"], fusion={"runner": runner})
        base, a0 = torch.randn(1).to(dtype), torch.randn(2).to(dtype)
        expected, expected_a0 = base.clone(), a0.clone()
        want = fn(expected_a0, expected.expand(2))
        torch.testing.assert_close(jfn(a0, base.expand(2)), want)
        torch.testing.assert_close((a0, base), (expected_a0, expected))


@pytest.mark.parametrize("runner", ["torch", "nvfuser"])
def test_a_region_output_that_views_the_buffer_keeps_the_write_out_of_place(runner, fake_nvfuser) -> None:  # noqa: F811
    def shift(cache, k):
        head = cache[:1]  # a view a region may return as it is
        cache[1:2] = head.squeeze(0).unsqueeze(0) + k * 0
        return head

    jfn = compiler.jit(shift, executors=["nvfuser", "torch"], fusion={"runner": runner})
    for seed in range(2):
        gen = torch.Generator().manual_seed(seed)
        cache, k = torch.randn(4, 3, generator=gen), torch.randn(1, 3, generator=gen)
        expected = cache.clone()
        want = shift(expected, k)
        torch.testing.assert_close(jfn(cache, k), want)
        torch.testing.assert_close(cache, expected)


def _two_columns(x, a, b):
    x[:, 0] = a
    x[:, 1] = x[:, 0] * 2 + b  # reads the first write
    return x.sum(0)


def _two_rows(cache, i, j, k, v):
    cache.index_copy_(0, i, k)
    before = cache * 2  # read between the two writes: the first's result
    cache.index_copy_(0, j, v)
    return before


def _twice_through_an_expanded_argument(a0):
    a0[1:].add_(1.5)
    a0[1:].add_(1.5)
    return a0 * 1


@pytest.mark.parametrize("runner", [None, "torch", "nvfuser"])
def test_a_chain_of_partial_writes_into_one_input_runs_in_place(runner, fake_nvfuser) -> None:  # noqa: F811
    options = {} if runner is None else {"executors": ["nvfuser", "torch"], "fusion": {"runner": runner}}
    cases = [
        (_two_columns, lambda g: (torch.randn(4, 3, generator=g), *torch.randn(2, 4, generator=g))),
        (_two_rows, lambda g: (torch.randn(6, 2, generator=g), torch.tensor([1]), torch.tensor([4]),
                               torch.randn(1, 2, generator=g), torch.randn(1, 2, generator=g))),
    ]  # fmt: skip
    for fn, make in cases:
        jfn = compiler.jit(fn, **options)
        for seed in range(3):
            args = make(torch.Generator().manual_seed(seed))
            expected = [a.clone() for a in args]
            want = fn(*expected)
            torch.testing.assert_close(jfn(*args), want)
            torch.testing.assert_close(args, expected)
        ops = _final_ops(jfn)
        assert "prims.copy_to" not in ops and sum(op.endswith("_") for op in ops) == 2, ops
    jfn = compiler.jit(_twice_through_an_expanded_argument, **options)
    base = torch.randn(1)
    expected = base.clone()
    want = _twice_through_an_expanded_argument(expected.expand(2))
    torch.testing.assert_close(jfn(base.expand(2)), want)
    torch.testing.assert_close(base, expected)


def test_a_second_write_of_a_view_of_the_first_stays_out_of_place() -> None:
    def copy_column(x, a):
        x[:, 0] = a
        x[:, 1] = x[:, 0]  # the written value views the buffer the write overwrites

    jfn = compiler.jit(copy_column)
    for seed in range(2):
        gen = torch.Generator().manual_seed(seed)
        x, a = torch.randn(4, 3, generator=gen), torch.randn(4, generator=gen)
        expected = x.clone()
        copy_column(expected, a)
        jfn(x, a)
        torch.testing.assert_close(x, expected)
