"""fold_conversions: exact conversion chains fold, rounding ones stay, reshape chains fold, a gather
reads the value before its conversion, and outputs and write-backs keep what eager aliases."""

from __future__ import annotations

import pytest
import torch

from compiler import prims
from compiler.passes.fold_conversions import EXACT_IN, fold_conversions, is_exact
from compiler.prims import Prim
from compiler.tracing.check_trace import check_trace
from compiler.tracing.interpreter import eval_trace
from tests.support.nvfuser_helpers import fake_nvfuser, prim_trace  # noqa: F401  (fixture)

F32, BF16, F16 = torch.float32, torch.bfloat16, torch.float16


def _every_value(dtype: torch.dtype) -> torch.Tensor:
    """Every value of an 8- or 16-bit dtype (each bit pattern), or a spread of a wider one's."""
    if dtype is torch.bool:
        return torch.tensor([False, True])
    if dtype.itemsize == 1:
        return torch.arange(256, dtype=torch.int16).to(torch.uint8).view(dtype)
    if dtype.itemsize == 2:
        return torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(dtype)
    bits = torch.randint(-(2**31), 2**31 - 1, (200_000,), generator=torch.Generator().manual_seed(0), dtype=torch.int32)
    edges = torch.tensor([-(2**31), 2**31 - 1, 0, 1, -1, 0x7F800000, -0x00800000, 0x7FC00000, 1], dtype=torch.int32)
    values = torch.cat([bits, edges])
    return values.view(dtype) if dtype is F32 else values


@pytest.mark.parametrize("source", sorted(EXACT_IN, key=str), ids=str)
def test_every_value_survives_each_conversion_the_table_calls_exact(source: torch.dtype) -> None:
    values = _every_value(source)
    for target in EXACT_IN[source]:
        back = values.to(target).to(source)
        torch.testing.assert_close(back, values, rtol=0, atol=0, equal_nan=True, msg=f"{source} -> {target}")


@pytest.mark.parametrize(
    ("source", "target"),
    [(F32, BF16), (F32, F16), (BF16, F16), (F16, BF16), (torch.int16, F16), (torch.int32, F32), (F32, torch.int64)],
)
def test_a_rounding_conversion_is_not_called_exact(source: torch.dtype, target: torch.dtype) -> None:
    values = _every_value(source)
    if source.is_floating_point:
        values = values[values.isfinite()]
    assert not is_exact(source, target)
    assert bool((values.to(target).to(source) != values).any()), f"{source} -> {target} changed no value"


def _converts(trace) -> list[tuple[torch.dtype, torch.dtype]]:
    return [(b.args[0].dtype, b.args[1]) for b in trace.bsyms if b.sym is Prim.CONVERT_ELEMENT_TYPE]


def test_a_lossless_round_trip_folds_to_its_input_and_the_chain_to_one_upcast() -> None:
    def to_chain(x):  # x.to(float32).to(bf16).float() * 2
        back = prims.convert_element_type(prims.convert_element_type(x, F32), BF16)
        return prims.mul(prims.convert_element_type(back, F32), 2.0)

    trace = prim_trace(to_chain, ((4, 8), BF16))
    folded = check_trace(fold_conversions(trace))
    assert _converts(trace) == [(BF16, F32), (F32, BF16), (BF16, F32)]
    assert _converts(folded) == [(BF16, F32)] and folded.bsyms[0].args[0].name == "a0"
    for seed in range(3):
        x = torch.randn(4, 8, generator=torch.Generator().manual_seed(seed)).bfloat16()
        assert torch.equal(eval_trace(folded, x), eval_trace(trace, x))


def test_a_chain_of_widenings_folds_to_one() -> None:
    trace = prim_trace(
        lambda x: prims.convert_element_type(prims.convert_element_type(x, F32), torch.float64), ((5,), F16)
    )
    folded = check_trace(fold_conversions(trace))
    assert _converts(folded) == [(F16, torch.float64)]
    x = torch.randn(5).half()
    assert torch.equal(eval_trace(folded, x), x.double())


def test_a_rounding_round_trip_keeps_its_rounding() -> None:
    def cast_after(x):  # f32 -> bf16 -> f32 rounds: it is the result, not a no-op
        return prims.add(prims.convert_element_type(prims.convert_element_type(x, BF16), F32), 1.0)

    trace = prim_trace(cast_after, ((64,), F32))
    folded = check_trace(fold_conversions(trace))
    assert _converts(folded) == [(F32, BF16), (BF16, F32)]
    x = torch.randn(64, dtype=torch.float32)
    assert torch.equal(eval_trace(folded, x), x.bfloat16().float() + 1.0)
    assert not torch.equal(eval_trace(folded, x), x + 1.0)


def test_a_reshape_chain_folds_and_a_view_back_to_the_input_shape_is_the_input() -> None:
    def viewed(x):  # x.view(2, 3, 8).view(6, 8) read by a sum
        return prims.sum(prims.reshape(prims.reshape(x, [2, 3, 8]), [6, 8]), (1,))

    trace = prim_trace(viewed, ((6, 8), F32))
    folded = check_trace(fold_conversions(trace))
    assert [b.sym for b in folded.bsyms] == [Prim.SUM] and folded.bsyms[0].args[0].name == "a0"
    x = torch.randn(6, 8)
    assert torch.equal(eval_trace(folded, x), x.sum(1))

    two_steps = prim_trace(lambda x: prims.exp(prims.reshape(prims.reshape(x, [2, 3, 8]), [48])), ((6, 8), F32))
    folded = check_trace(fold_conversions(two_steps))
    reshape, exp = folded.bsyms
    assert reshape.sym is Prim.RESHAPE and reshape.args[0].name == "a0" and exp.sym is Prim.EXP
    assert torch.equal(eval_trace(folded, x), x.exp().reshape(48))


def test_an_output_never_becomes_an_input_nor_another_output() -> None:
    """eager returns a view of the input, and its own tensor for each output: no rule may return the
    input itself, nor one tensor for two outputs."""
    viewed_back = prim_trace(lambda x: prims.reshape(prims.reshape(x, [2, 3, 8]), [6, 8]), ((6, 8), F32))
    folded = check_trace(fold_conversions(viewed_back))
    assert folded.output.name != "a0" and [b.args[0].name for b in folded.bsyms] == ["a0"]  # one view of it

    round_trip = prim_trace(
        lambda x: prims.convert_element_type(prims.convert_element_type(x, F32), BF16), ((4,), BF16)
    )
    assert check_trace(fold_conversions(round_trip)).output.name != "a0"

    def two_outputs(x):
        y = prims.exp(x)
        return y, prims.reshape(prims.reshape(y, [2, 2]), [4])

    folded = check_trace(fold_conversions(prim_trace(two_outputs, ((4,), F32))))
    assert folded.output[0].name != folded.output[1].name


def test_a_value_written_back_stays_its_own() -> None:
    def write_round_trip(x, buffer):  # buffer.copy_(x.float().to(bf16)): the write-back owns its value
        value = prims.convert_element_type(prims.convert_element_type(x, F32), BF16)
        prims.copy_to(value, buffer)
        return prims.neg(x)

    trace = prim_trace(write_round_trip, ((4,), BF16), ((4,), BF16))
    folded = check_trace(fold_conversions(trace))
    (write,) = [b for b in folded.bsyms if b.sym is Prim.COPY_TO]
    assert write.args[0].name not in {"a0", "a1"}


@pytest.mark.parametrize("gather", ["take_along_dim", "index_select"])
def test_a_gather_reads_the_value_before_its_conversion(gather: str) -> None:
    def loss_target(x, index):  # x.float() gathered: the gather reads bf16 x, the few picked are upcast
        up = prims.convert_element_type(x, F32)
        if gather == "take_along_dim":
            picked = prims.take_along_dim(up, index, 1)
        else:
            picked = prims.index_select(up, 0, index)
        return prims.add(picked, 1.0)

    index_shape = (6, 1) if gather == "take_along_dim" else (3,)
    trace = prim_trace(loss_target, ((6, 10), BF16), (index_shape, torch.int64))
    folded = check_trace(fold_conversions(trace))
    picks = [b for b in folded.bsyms if b.sym is Prim(gather)]
    assert len(picks) == 1 and picks[0].args[0].name == "a0" and picks[0].output.dtype == BF16
    assert _converts(folded) == [(BF16, F32)]  # of the picked values only: the whole upcast is dead
    for seed in range(3):
        gen = torch.Generator().manual_seed(seed)
        x = torch.randn(6, 10, generator=gen).bfloat16()
        index = torch.randint(0, 6 if gather == "index_select" else 10, index_shape, generator=gen)
        assert torch.equal(eval_trace(folded, x, index), eval_trace(trace, x, index))


def _reshape_of_upcast(returned_too: bool, read_twice: bool):
    def fn(x):  # x.float().view(6, 8) read by a sum (transformers' `logits.float().view(-1, vocab)`)
        up = prims.convert_element_type(x, F32)
        viewed = prims.reshape(up, [6, 8])
        total = prims.sum(viewed, (1,))
        if read_twice:
            total = prims.add(total, prims.reshape(prims.sum(up, (2,)), [6]))
        return (total, viewed) if returned_too else total

    return fn


def test_a_reshape_of_an_upcast_read_by_nothing_else_reshapes_the_input() -> None:
    trace = prim_trace(_reshape_of_upcast(returned_too=False, read_twice=False), ((2, 3, 8), BF16))
    folded = check_trace(fold_conversions(trace))
    assert [(b.sym, b.args[0].name) for b in folded.bsyms[:2]] == [
        (Prim.RESHAPE, "a0"),
        (Prim.CONVERT_ELEMENT_TYPE, folded.bsyms[0].output.name),
    ]
    assert folded.bsyms[0].output.dtype == BF16
    x = torch.randn(2, 3, 8).bfloat16()
    assert torch.equal(eval_trace(folded, x), eval_trace(trace, x))


@pytest.mark.parametrize(("returned_too", "read_twice"), [(True, False), (False, True)])
def test_a_reshape_of_an_upcast_that_is_returned_or_read_elsewhere_stays(returned_too: bool, read_twice: bool) -> None:
    """Moved, the upcast would be computed (and, where a region outputs both, written) twice."""
    trace = prim_trace(_reshape_of_upcast(returned_too, read_twice), ((2, 3, 8), BF16))
    folded = check_trace(fold_conversions(trace))
    assert [b.sym for b in folded.bsyms] == [b.sym for b in trace.bsyms]


def test_a_gather_of_a_reshaped_upcast_reads_the_reshaped_input() -> None:
    def loss_target(x, index):  # x.float().view(6, 10) gathered, as transformers' loss does
        picked = prims.take_along_dim(prims.reshape(prims.convert_element_type(x, F32), [6, 10]), index, 1)
        return prims.add(picked, 1.0)

    trace = prim_trace(loss_target, ((2, 3, 10), BF16), ((6, 1), torch.int64))
    folded = check_trace(fold_conversions(trace))
    (reshape,) = [b for b in folded.bsyms if b.sym is Prim.RESHAPE]
    (pick,) = [b for b in folded.bsyms if b.sym is Prim.TAKE_ALONG_DIM]
    assert reshape.args[0].name == "a0" and pick.args[0] is reshape.output and pick.output.dtype == BF16
    x, index = torch.randn(2, 3, 10).bfloat16(), torch.randint(0, 10, (6, 1))
    assert torch.equal(eval_trace(folded, x, index), eval_trace(trace, x, index))


@pytest.mark.parametrize("dtype", [F32, BF16, torch.int64])
def test_a_multiplication_or_division_by_one_is_its_operand(dtype: torch.dtype) -> None:
    def scaled(x):  # a rotary embedding's `cos * attention_scaling` of 1, the other ways round too
        ones = prims.mul(1, prims.mul(x, 1))
        ones = prims.div(ones, 1) if dtype.is_floating_point else ones  # (prims.div of integers truncates)
        return prims.add(ones, x), prims.mul(x, 1.5) if dtype.is_floating_point else prims.mul(x, 3)

    trace = prim_trace(scaled, ((4, 8), dtype))
    folded = check_trace(fold_conversions(trace))
    assert [b.sym for b in folded.bsyms] == [Prim.ADD, Prim.MUL]
    assert folded.bsyms[0].args[0].name == "a0"
    for seed in range(3):
        x = (torch.randn(4, 8, generator=torch.Generator().manual_seed(seed)) * 100).to(dtype)
        x[0, :3] = torch.tensor([float("nan"), float("inf"), -0.0]).to(dtype) if dtype.is_floating_point else x[0, :3]
        for got, want in zip(eval_trace(folded, x), eval_trace(trace, x)):
            torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


def test_a_returned_multiplication_by_one_stays_a_tensor_of_its_own() -> None:
    # eager's `x * 1` is a new tensor: the caller may write into it without touching x
    trace = prim_trace(lambda x: (prims.mul(x, 1), prims.mul(prims.sin(x), 1.0)), ((4, 8), F32))
    folded = check_trace(fold_conversions(trace))
    assert [b.sym for b in folded.bsyms] == [Prim.MUL, Prim.SIN]
    assert folded.bsyms[0].args[0].name == "a0"


def _padding_mask(x, positions):
    """transformers' padding mask when the call passes none: ones, as bool, flattened and read at
    (batch, position) indices; then used to mask `x`."""
    ones = prims.convert_element_type(prims.full([2, 8], 1.0, F32, x.device), torch.bool)
    picked = prims.index_select(prims.reshape(ones, [16]), 0, positions)
    mask = prims.broadcast_in_dim(prims.reshape(picked, [2, 8]), [2, 8], [0, 1])
    return prims.where(mask, x, -1.0)


def test_a_conversion_reshape_and_gather_of_a_filled_tensor_are_one_fill_of_the_result() -> None:
    trace = prim_trace(_padding_mask, ((2, 8), F32), ((16,), torch.int64))
    folded = check_trace(fold_conversions(trace))
    assert [b.sym for b in folded.bsyms] == [Prim.FULL, Prim.BROADCAST_IN_DIM, Prim.WHERE]
    assert folded.bsyms[0].args[:3] == ([2, 8], True, torch.bool)
    for seed in range(3):
        g = torch.Generator().manual_seed(seed)
        x, positions = torch.randn(2, 8, generator=g), torch.randint(0, 16, (16,), generator=g)
        torch.testing.assert_close(eval_trace(folded, x, positions), eval_trace(trace, x, positions), rtol=0, atol=0)


@pytest.mark.parametrize(("value", "source", "target"), [(0.1, F32, BF16), (1e-3, F32, F16), (-2.7, F32, torch.int32)])
def test_a_converted_fill_rounds_as_the_filled_tensor_converts(value: float, source, target) -> None:
    trace = prim_trace(
        lambda x: prims.add(prims.convert_element_type(prims.full([4], value, source, x.device), target), x),
        ((4,), target),
    )
    folded = check_trace(fold_conversions(trace))
    assert [b.sym for b in folded.bsyms] == [Prim.FULL, Prim.ADD]
    x = torch.zeros(4, dtype=target)
    torch.testing.assert_close(eval_trace(folded, x), eval_trace(trace, x), rtol=0, atol=0)


def test_a_returned_view_of_a_fill_stays_a_view() -> None:
    trace = prim_trace(lambda x: prims.reshape(prims.full([2, 8], 0.0, F32, x.device), [16]), ((2,), F32))
    assert [b.sym for b in check_trace(fold_conversions(trace)).bsyms] == [Prim.FULL, Prim.RESHAPE]


def _gather_by_column(a_shape, dim, column_shape, into, index_shape):
    def pick(a, column):
        return prims.take_along_dim(a, prims.broadcast_in_dim(column, list(index_shape), into), dim)

    return prim_trace(pick, (a_shape, F32), (column_shape, torch.int64))


@pytest.mark.parametrize(
    ("a_shape", "dim", "column_shape", "into", "index_shape"),
    [
        ((32, 8), 0, (16,), [0], (16, 8)),  # `a.gather(0, idx[:, None].expand(-1, 8))`
        ((32, 8), 0, (16, 1), [0, 1], (16, 8)),  # the column kept 2-D: reshaped to 1-D first
        ((2, 10, 4), 1, (5,), [1], (2, 5, 4)),
        ((1, 7, 1), 1, (1, 3, 1), [0, 1, 2], (1, 3, 1)),  # size-1 dims everywhere else
    ],
)
def test_a_gather_by_one_broadcast_column_is_an_index_select(a_shape, dim, column_shape, into, index_shape) -> None:
    trace = _gather_by_column(a_shape, dim, column_shape, into, index_shape)
    folded = check_trace(fold_conversions(trace))
    assert Prim.TAKE_ALONG_DIM not in [b.sym for b in folded.bsyms]
    assert [b.sym for b in folded.bsyms][-1] is Prim.INDEX_SELECT
    for seed in range(3):
        gen = torch.Generator().manual_seed(seed)
        a = torch.randn(a_shape, generator=gen)
        column = torch.randint(0, a_shape[dim], column_shape, generator=gen)
        assert torch.equal(eval_trace(folded, a, column), eval_trace(trace, a, column))


@pytest.mark.parametrize(
    ("a_shape", "dim", "column_shape", "into", "index_shape"),
    [
        ((32, 8), 0, (16, 8), [0, 1], (16, 8)),  # the index varies along dim 1 too
        ((32, 8), 0, (16,), [0], (16, 4)),  # it picks from only the first 4 of a's 8 columns
        ((32, 8), 0, (1,), [0], (16, 8)),  # one index broadcast along the gathered dim as well
    ],
)
def test_a_gather_by_an_index_that_is_not_one_column_stays(a_shape, dim, column_shape, into, index_shape) -> None:
    trace = _gather_by_column(a_shape, dim, column_shape, into, index_shape)
    assert [b.sym for b in check_trace(fold_conversions(trace)).bsyms][-1] is Prim.TAKE_ALONG_DIM


def _table_read_by_iota(size: int, length: int, start: int, step: int, returned: bool = False):
    def positions(table, x):
        rows = prims.index_select(table, 0, prims.iota(length, start, step, torch.int64, table.device))
        total = prims.add(rows, x)
        return (total, rows) if returned else total

    return prim_trace(positions, ((size, 4), F32), ((length, 4), F32))


@pytest.mark.parametrize(
    ("size", "length", "start", "step"), [(10, 4, 0, 1), (10, 4, 3, 2), (10, 1, 9, 1), (1, 1, 0, 1)]
)
def test_an_index_select_by_an_iota_is_a_slice(size: int, length: int, start: int, step: int) -> None:
    trace = _table_read_by_iota(size, length, start, step)
    folded = check_trace(fold_conversions(trace))
    syms = [b.sym for b in folded.bsyms]
    assert Prim.INDEX_SELECT not in syms and Prim.IOTA not in syms
    assert syms == ([Prim.ADD] if length == size else [Prim.SLICE, Prim.ADD])  # all of it: the table itself
    for seed in range(3):
        gen = torch.Generator().manual_seed(seed)
        table, x = torch.randn(size, 4, generator=gen), torch.randn(length, 4, generator=gen)
        assert torch.equal(eval_trace(folded, table, x), eval_trace(trace, table, x))


def test_an_index_select_by_an_iota_past_the_end_or_returned_stays() -> None:
    past_the_end = _table_read_by_iota(10, 4, 8, 1)  # picks row 11 of 10: eager raises, so must the trace
    assert Prim.INDEX_SELECT in [b.sym for b in fold_conversions(past_the_end).bsyms]
    returned = _table_read_by_iota(10, 4, 0, 2, returned=True)  # eager returns rows of its own, not a view
    assert Prim.INDEX_SELECT in [b.sym for b in fold_conversions(returned).bsyms]


def test_a_value_a_forward_saves_for_its_backward_may_become_its_input() -> None:
    """A forward (`split_backward`'s `(outputs, saved)`) may save the table itself for the rows it
    reads whole: only the backward reads saved values. Returned to the caller, the rows stay apart."""
    trace = _table_read_by_iota(4, 4, 0, 1, returned=True)
    total, rows = trace.output
    forward = trace.with_bsyms(trace.bsyms, output=((total,), (rows,)), name="forward")
    folded = check_trace(fold_conversions(forward))
    assert folded.output[1][0].name == "a0" and Prim.INDEX_SELECT not in [b.sym for b in folded.bsyms]
    shown = trace.with_bsyms(trace.bsyms, output=((total, rows), ()), name="forward")
    assert Prim.INDEX_SELECT in [b.sym for b in fold_conversions(shown).bsyms]


def test_an_index_select_by_an_iota_from_a_symbolic_start_stays() -> None:
    # a decode step's positions, `arange(past, past + n)`: where they lie is known only when it runs
    def positions(table, past):
        return prims.add(prims.index_select(table, 0, prims.iota(4, past, 1, torch.int64, table.device)), 1.0)

    trace = prim_trace(positions, ((10, 4), F32), (int, 3))
    folded = check_trace(fold_conversions(trace))
    assert Prim.INDEX_SELECT in [b.sym for b in folded.bsyms]
    table = torch.randn(10, 4)
    assert torch.equal(eval_trace(folded, table, 3), eval_trace(trace, table, 3))


@pytest.mark.parametrize("numbers", ["constant", "symbolic"])
def test_position_embeddings_read_by_arange_match_eager_for_every_offset(numbers: str) -> None:
    import torch.nn.functional as F

    import compiler

    def embed(table, x, past):
        return x + F.embedding(torch.arange(past, past + x.shape[0]), table) * 2

    jitted = compiler.jit(embed, numbers=numbers)
    table = torch.randn(12, 4)
    for past in (0, 3, 8):
        x = torch.randn(4, 4)
        torch.testing.assert_close(jitted(table, x, past), embed(table, x, past))
    x = torch.randn(12, 4)  # all of the table, from 0
    torch.testing.assert_close(jitted(table, x, 0), embed(table, x, 0))


def _picked_by_a_constant(size: int, k: int, n: int = 1, returned: bool = False):
    """`x[[k] * n]` as the ops layer writes it: the index normalized where it is negative."""

    def pick(table, x):
        index = prims.full([n], k, torch.int64, table.device)
        index = prims.where(prims.lt(index, 0), prims.add(index, size), index)
        rows = prims.index_select(table, 0, index)
        total = prims.add(rows, x)
        return (total, rows) if returned else total

    return prim_trace(pick, ((size, 4), F32), ((n, 4), F32))


@pytest.mark.parametrize(("size", "k", "n"), [(14, -2, 1), (14, -1, 1), (14, 0, 1), (5, 3, 3), (1, 0, 1), (1, -1, 2)])
def test_an_index_select_by_a_constant_index_is_a_slice(size: int, k: int, n: int) -> None:
    trace = _picked_by_a_constant(size, k, n)
    folded = check_trace(fold_conversions(trace))
    syms = [b.sym for b in folded.bsyms]
    assert syms == ([Prim.SLICE, Prim.ADD] if n == 1 else [Prim.SLICE, Prim.BROADCAST_IN_DIM, Prim.ADD])
    for seed in range(3):
        gen = torch.Generator().manual_seed(seed)
        table, x = torch.randn(size, 4, generator=gen), torch.randn(n, 4, generator=gen)
        assert torch.equal(eval_trace(folded, table, x), table[[k] * n] + x)


def test_an_index_select_by_a_constant_index_out_of_range_or_returned_stays() -> None:
    out_of_range = _picked_by_a_constant(4, -7, 1)  # eager raises, and so must the trace
    assert Prim.INDEX_SELECT in [b.sym for b in fold_conversions(out_of_range).bsyms]
    returned = _picked_by_a_constant(4, 1, 1, returned=True)  # eager returns a row of its own, not a view
    assert Prim.INDEX_SELECT in [b.sym for b in fold_conversions(returned).bsyms]


_CONSTANT_CASES = [
    (lambda a: prims.where(prims.lt(a, 0), prims.add(a, 14), a), torch.int64, -2),
    (lambda a: prims.bitwise_not(prims.ge(prims.abs(a), 3)), torch.int32, -5),
    (lambda a: prims.div(prims.sub(prims.mul(a, 3.0), 0.1), 7.0), F32, 1.1),
    (lambda a: prims.maximum(prims.neg(a), prims.sign(a)), BF16, 0.3),
    (lambda a: prims.ceil(prims.mul(a, 2.5)), F16, 1.7),
]


@pytest.mark.parametrize(("fn", "dtype", "value"), _CONSTANT_CASES)
def test_exact_elementwise_prims_of_fills_fold_to_a_fill_of_eagers_value(fn, dtype, value) -> None:
    def computed(x):
        return prims.add(x, prims.convert_element_type(fn(prims.full([3, 2], value, dtype, x.device)), F32))

    trace = prim_trace(computed, ((3, 2), F32))
    folded = check_trace(fold_conversions(trace))
    assert [b.sym for b in folded.bsyms] == [Prim.FULL, Prim.ADD]
    x = torch.randn(3, 2)
    assert torch.equal(eval_trace(folded, x), eval_trace(trace, x))


def test_transcendental_or_non_finite_or_returned_constants_stay() -> None:
    def exp_of_fill(x):  # a device's exp may round otherwise than the CPU's
        return prims.add(x, prims.exp(prims.full([2], 0.5, F32, x.device)))

    def inf_of_fill(x):  # 1 / 0
        return prims.add(x, prims.div(prims.full([2], 1.0, F32, x.device), 0.0))

    def returned(x):
        made = prims.add(prims.full([2], 2, torch.int64, x.device), 1)
        return x, made

    for fn, kept in ((exp_of_fill, Prim.EXP), (inf_of_fill, Prim.DIV), (returned, Prim.ADD)):
        folded = check_trace(fold_conversions(prim_trace(fn, ((2,), F32))))
        assert kept in [b.sym for b in folded.bsyms], fn.__name__


@pytest.mark.usefixtures("fake_nvfuser")
def test_heads_picked_by_a_list_index_are_slices_and_match_eager() -> None:
    # Falcon's multi-query split of a fused projection: `qkv[:, :, [-2]]` for the key head
    import compiler

    def split_heads(qkv):
        return qkv[:, :, :-2] * qkv[:, :, [-2]] + qkv[:, :, [-1]] + qkv[:, :, [0, 0]].sum(2, keepdim=True)

    for seed, shape in enumerate([(2, 5, 6, 4), (1, 1, 3, 8), (3, 2, 14, 1)]):
        jitted = compiler.jit(split_heads, executors=["nvfuser", "torch"], fallback=False)
        qkv = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
        torch.testing.assert_close(jitted(qkv), split_heads(qkv), rtol=0, atol=0)
        printed = str(compiler.last_traces(jitted)[-1])  # sizes known: the picks are slices
        assert "index_select" not in printed and "permute" not in printed, printed  # plain slices of qkv
        for view in (qkv.transpose(0, 1), qkv[:, :, :, :1]):  # then sizes and layouts met anew
            torch.testing.assert_close(jitted(view), split_heads(view), rtol=0, atol=0)


@pytest.mark.parametrize(
    ("p", "window", "q", "kept"),
    [
        ([2, 0, 1, 3], ([12, 0, 0, 0], [13, 2, 5, 4], [1, 1, 1, 1]), [1, 2, 0, 3], [Prim.SLICE]),
        ([2, 0, 1, 3], ([0, 1, 0, 0], [14, 2, 5, 4], [3, 1, 2, 1]), [1, 2, 0, 3], [Prim.SLICE]),
        ([1, 0, 3, 2], ([0, 0, 1, 0], [5, 2, 4, 4], [1, 1, 2, 1]), [0, 2, 1, 3], [Prim.SLICE, Prim.PERMUTE]),
    ],
)
def test_a_slice_between_two_permutes_is_a_slice_of_the_input(p, window, q, kept) -> None:
    # `qkv[..., [-2], :]` once its index folds: the indexed dim moved to the front, sliced, moved back
    def picked(x):
        return prims.mul(prims.permute(prims.slice(prims.permute(x, p), *window), q), 2.0)

    trace = prim_trace(picked, ((2, 5, 14, 4), F32))
    folded = check_trace(fold_conversions(trace))
    assert [b.sym for b in folded.bsyms] == [*kept, Prim.MUL]
    for seed in range(3):
        x = torch.randn(2, 5, 14, 4, generator=torch.Generator().manual_seed(seed))
        assert torch.equal(eval_trace(folded, x), eval_trace(trace, x))
        assert torch.equal(eval_trace(folded, x.transpose(1, 3).contiguous().transpose(1, 3)), eval_trace(trace, x))


def test_a_cat_of_fills_folds_only_where_every_bit_is_the_same() -> None:
    def joined(x, first, second):
        fills = [prims.full([2], v, F32, x.device) for v in (first, second)]
        return prims.add(x, prims.cat(fills, 0))

    for first, second, folds in ((1.5, 1.5, True), (0.0, -0.0, False), (2.0, 3.0, False)):
        trace = prim_trace(lambda x, first=first, second=second: joined(x, first, second), ((4,), F32))
        folded = check_trace(fold_conversions(trace))
        assert (Prim.CAT not in [b.sym for b in folded.bsyms]) == folds, (first, second)
        x = torch.randn(4)
        assert torch.equal(eval_trace(folded, x), eval_trace(trace, x))
        assert torch.equal(eval_trace(folded, x).signbit(), eval_trace(trace, x).signbit())
