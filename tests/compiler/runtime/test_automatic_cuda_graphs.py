"""Automatic CUDA graphs (`jit`'s default `cuda_graphs=None`): nothing on a machine without CUDA;
on one, a computation called again laid out as before is captured on its third call and replayed,
inputs at a new address every call are copied, and what cannot be graphed (a written input that
moves, numbers that change every call, CPU results) runs without graphs, silently, with eager's
results call after call."""

from __future__ import annotations

import warnings

import pytest
import torch

import compiler
from compiler.runtime.cuda_graphs import GraphedComputation
from compiler.runtime.pipeline import written_inputs

STEPS = 10


def _axpy(buffer: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    buffer.mul_(0.5).add_(x)
    return (x * 2).sin()


def test_the_inputs_a_computation_writes_are_known_by_position() -> None:
    jfn = compiler.jit(_axpy, executors=["torch"], cuda_graphs=False)
    jfn(torch.zeros(8), torch.randn(8))
    assert written_inputs(compiler.last_traces(jfn)) == {0}


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
def test_without_cuda_the_default_graphs_nothing_and_says_so() -> None:
    jfn = compiler.jit(_axpy)
    buffer, eager_buffer, x = torch.zeros(8), torch.zeros(8), torch.randn(8)
    for _ in range(4):
        torch.testing.assert_close(jfn(buffer, x), _axpy(eager_buffer, x))
    torch.testing.assert_close(buffer, eager_buffer)
    (entry,) = jfn.entries
    assert not isinstance(entry.computation, GraphedComputation)
    assert "entry 0: not graphed (CUDA is unavailable)" in str(compiler.examine.cuda_graphs(jfn))


def _automatic(fn=lambda weight, batch: weight * batch) -> GraphedComputation:
    """An automatic graphed computation of (weight, batch) set up as `key` sets it up on a first call
    with CUDA tensors: both keyed by address."""
    graphed = GraphedComputation(fn, automatic=True)
    graphed._input_count, graphed._keyed_positions = 2, [0, 1]
    return graphed


def test_an_input_at_a_new_address_with_all_else_the_same_is_copied_from_then_on() -> None:
    graphed = _automatic()
    inputs = (torch.zeros(4), torch.zeros(4))
    for address in (100, 200):  # the weight stays, the batch moves
        graphed._note_numbers(((7, address), ((1,), (1,))), inputs)
    assert graphed._copied == [1] and graphed._keyed_positions == [0] and graphed.stats.reason is None
    assert graphed.stats.copied_inputs == 1 and "inputs copied before each replay" in str(graphed.stats)
    assert graphed.warm_calls == 2 and graphed.max_graphs == 4


def test_a_backwards_saved_values_that_move_stay_keyed_by_address() -> None:
    # they move once, when the forward's graph starts lending its own buffers (1 GiB here)
    graphed = GraphedComputation(lambda saved, cotangent: saved * cotangent, automatic=True, backward=True)
    graphed._input_count, graphed._keyed_positions = 2, [0, 1]
    inputs = (torch.empty(1).expand(1 << 28), torch.zeros(4))
    for address in (100, 200):
        graphed._note_numbers(((address, 7), ((1,), (1,))), inputs)
    assert graphed._copied == [] and graphed._keyed_positions == [0, 1] and graphed.stats.reason is None


def test_a_move_together_with_a_change_of_strides_is_no_move() -> None:
    graphed = _automatic()
    inputs = (torch.zeros(4), torch.zeros(4))
    graphed._note_numbers(((7, 100), ((1,), (1,))), inputs)
    graphed._note_numbers(((7, 200), ((1,), (2,))), inputs)
    assert graphed._copied == [] and graphed.stats.copied_inputs == 0


def test_a_written_input_that_moves_stops_graphs_naming_it() -> None:
    graphed = _automatic()
    graphed.written = frozenset({1})
    inputs = (torch.zeros(4), torch.zeros(4))
    for address in (100, 200):
        graphed._note_numbers(((7, address), ((1,), (1,))), inputs)
    assert graphed._copied == [] and graphed.stats.reason == "the computation writes 'batch', which moved between calls"


def test_inputs_too_large_to_copy_every_call_stop_graphs() -> None:
    graphed = _automatic()
    inputs = (torch.zeros(4), torch.empty(1).expand(1 << 27))  # 512 MiB as far as nbytes says
    for address in (100, 200):
        graphed._note_numbers(((7, address), ((1,), (0,))), inputs)
    assert graphed._copied == [] and "'batch') would need 512 MiB copied per call" in graphed.stats.reason


def test_numbers_that_change_every_call_stop_automatic_graphs_without_a_warning() -> None:
    graphed = _automatic(lambda weight, batch, lr: weight * batch * lr)
    graphed._input_count, graphed._other_positions = 3, [2]
    inputs = (torch.zeros(4), torch.zeros(4), 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for lr in (0.1, 0.2, 0.3, 0.4):
            graphed._note_numbers(((7, 100), ((1,), (1,)), ((float, lr),)), inputs)
    assert graphed.stats.reason == "number inputs change from call to call: 'lr'"


# --------------------------------------------------------------------------------------------
# On a GPU


def _stats(jfn: compiler.JittedFunction) -> str:
    return str(compiler.examine.cuda_graphs(jfn))


@pytest.mark.gpu
def test_a_training_loop_over_a_new_batch_every_step_replays_by_default() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 64)).cuda()
    eager = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 64)).cuda()
    eager.load_state_dict(model.state_dict())
    jfn = compiler.jit(model)
    gen = torch.Generator(device="cuda").manual_seed(1)
    for _ in range(STEPS):
        batch = torch.randn(32, 64, device="cuda", generator=gen)  # a new tensor, most likely at a new address
        for net, run in ((model, jfn), (eager, eager)):
            net.zero_grad(set_to_none=True)
            loss = run(batch).square().mean()
            loss.backward()
            with torch.no_grad():
                for p in net.parameters():
                    p.sub_(0.1 * p.grad)
        for got, want in zip(model.parameters(), eager.parameters()):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    (entry,) = jfn.entries
    forward = entry.computation.forward.stats
    assert forward.reason is None and forward.replays >= STEPS - 5, _stats(jfn)
    assert all(b.stats.replays >= STEPS - 6 for b in entry.computation.backwards.values()), _stats(jfn)


@pytest.mark.gpu
def test_a_written_input_at_a_new_address_every_call_runs_without_graphs_and_stays_right() -> None:
    jfn = compiler.jit(_axpy)
    x = torch.randn(1024, device="cuda")
    for step in range(STEPS):
        buffer = torch.full((1024,), float(step), device="cuda")
        eager_buffer = buffer.clone()
        torch.testing.assert_close(jfn(buffer, x), _axpy(eager_buffer, x))
        torch.testing.assert_close(buffer, eager_buffer)
    assert "the computation writes 'buffer', which moved between calls" in _stats(jfn)


def _decode_step(cache: torch.Tensor, position: torch.Tensor, token: torch.Tensor) -> torch.Tensor:
    cache.index_copy_(0, position, token)
    return torch.softmax(cache @ token[0], dim=0)


@pytest.mark.gpu
def test_a_cache_written_in_place_at_its_own_address_replays() -> None:
    cache, eager_cache = torch.zeros(64, 32, device="cuda"), torch.zeros(64, 32, device="cuda")
    jfn = compiler.jit(_decode_step)
    for step in range(STEPS):
        position = torch.tensor([step], device="cuda")  # new tensors every step, as a decoder makes them
        token = torch.randn(1, 32, device="cuda")
        torch.testing.assert_close(jfn(cache, position, token), _decode_step(eager_cache, position, token))
        torch.testing.assert_close(cache, eager_cache)
    stats = jfn.entries[0].computation.stats
    assert stats.reason is None and stats.replays >= STEPS - 5 and stats.copied_inputs == 2, _stats(jfn)


def _with_cpu_result(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x * 2, torch.arange(3) * x.shape[0]


@pytest.mark.gpu
def test_a_computation_returning_a_cpu_tensor_runs_without_graphs() -> None:
    jfn = compiler.jit(_with_cpu_result)
    x = torch.randn(16, device="cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(4):
            doubled, counted = jfn(x)
            torch.testing.assert_close(doubled, x * 2)
            assert counted.tolist() == [0, 16, 32]
    assert "capture failed" in _stats(jfn) and "a replay does not compute it" in _stats(jfn)


def _dropped(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.dropout(x.sin(), p=0.5, training=True) * 3


@pytest.mark.gpu
def test_dropout_replayed_draws_what_eager_draws_under_each_seed() -> None:
    jfn = compiler.jit(_dropped)
    x = torch.randn(256, 64, device="cuda")
    for seed in range(STEPS):
        torch.manual_seed(seed)
        got = jfn(x)
        torch.manual_seed(seed)
        torch.testing.assert_close(got, _dropped(x))
    assert jfn.entries[0].computation.stats.replays >= STEPS - 3, _stats(jfn)


def _scale_shift(x: torch.Tensor) -> torch.Tensor:
    return (x * 3 + 1).relu()


@pytest.mark.gpu
def test_a_callers_own_capture_records_the_computation_not_a_replay() -> None:
    jfn = compiler.jit(_scale_shift)
    x = torch.randn(4096, device="cuda")
    for _ in range(4):  # graphed by now
        jfn(x)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = jfn(x)
    for value in (-1.0, 2.0):
        x.fill_(value)
        graph.replay()
        torch.testing.assert_close(y, _scale_shift(x))
    assert jfn.entries[0].computation.stats.replays >= 1, _stats(jfn)


def _first_row(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x[0], x.sum(0)


@pytest.mark.gpu
def test_an_output_viewing_an_input_at_a_new_address_every_call_views_the_callers_tensor() -> None:
    jfn = compiler.jit(_first_row)
    for _ in range(STEPS):
        x = torch.randn(8, 16, device="cuda")
        row, total = jfn(x)
        torch.testing.assert_close(total, x.sum(0))
        assert row.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()  # as eager's view
        x.add_(1.0)
        torch.testing.assert_close(row, x[0])


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_inputs_on_another_device_than_the_current_one_are_captured_on_theirs() -> None:
    jfn = compiler.jit(_scale_shift)
    x = torch.randn(4096, device="cuda:1")
    with torch.cuda.device(0):
        for value in range(STEPS):
            x.fill_(float(value) - 4.0)
            torch.testing.assert_close(jfn(x), _scale_shift(x))
    stats = jfn.entries[0].computation.stats
    assert stats.reason is None and stats.replays >= STEPS - 3, _stats(jfn)
    both = compiler.jit(lambda a, b: (a * 2, b * 2))
    for _ in range(4):
        both(x, torch.ones(4096, device="cuda:0"))
    assert "inputs on cuda:0, cuda:1: a graph records one device's work" in _stats(both)
