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
from compiler.passes.device_scalars import NumberStaysNumber
from compiler.runtime.cuda_graphs import GraphedComputation
from compiler.runtime.pipeline import _reading_device_scalars, written_inputs

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
    assert graphed.stats.reason == (
        "number inputs change from call to call: 'lr' "
        "(only a computation without autograd reads them from device scalars)"
    )


def _changing_lr(graphed: GraphedComputation) -> tuple:
    """Notes four calls of (weight, batch, lr) whose lr alone changes; returns the last inputs."""
    graphed._input_count, graphed._other_positions = 3, [2]
    for lr in (0.1, 0.2, 0.3, 0.4):
        inputs = (torch.zeros(4), torch.ones(4), lr)
        graphed._note_numbers(((7, 100), ((1,), (1,)), ((float, lr),)), inputs)
    return inputs


def test_numbers_that_change_every_call_are_read_from_device_scalars_filled_by_each_call() -> None:
    built = []

    def reading_scalars(positions: tuple[int, ...], device: torch.device):
        built.append((positions, device))
        return lambda weight, batch, lr: weight + batch * lr

    graphed = _automatic(lambda weight, batch, lr: weight * batch * lr)
    graphed.device_scalars = reading_scalars
    _changing_lr(graphed)
    assert built == [((2,), torch.device("cpu"))] and graphed.stats.reason is None
    assert "number inputs read from device scalars, as they change every call: 'lr'" in str(graphed.stats)
    for lr in (0.5, -0.25):
        inputs = graphed._with_scalars((torch.zeros(4), torch.ones(4), lr))
        assert inputs[2].dtype == torch.float64 and inputs[2].shape == () and inputs[2].item() == lr
        assert graphed.computation(*inputs).tolist() == [lr] * 4


def test_numbers_that_cannot_be_device_scalars_stop_automatic_graphs_saying_why() -> None:
    def reading_scalars(positions: tuple[int, ...], device: torch.device):
        raise NumberStaysNumber("'lr' is read by full, which takes it as a number")

    graphed = _automatic(lambda weight, batch, lr: weight * batch * lr)
    graphed.device_scalars = reading_scalars
    _changing_lr(graphed)
    assert graphed.stats.reason == (
        "number inputs change from call to call: 'lr' "
        "(they stay numbers: 'lr' is read by full, which takes it as a number)"
    )


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


def _adam(p, g, m, v, step: int, lr: float) -> None:
    m.lerp_(g, 0.1)
    v.mul_(0.999).addcmul_(g, g, value=0.001)
    denominator = (v / (1 - 0.999**step)).sqrt().add_(1e-8)
    p.addcdiv_(m, denominator, value=-lr / (1 - 0.9**step))


def test_an_entry_compiled_again_reading_its_numbers_from_0d_tensors_updates_as_eager() -> None:
    torch.manual_seed(0)
    state = [torch.randn(1000, 3) for _ in range(3)] + [torch.rand(1000, 3)]
    eager = [t.clone() for t in state]
    jfn = compiler.jit(_adam)  # the default executors: Inductor's regions on CPU
    for step in (1, 2, 3):  # the second call makes step and lr symbolic
        jfn(*state, step, 1e-2 * 0.9**step)
        _adam(*eager, step, 1e-2 * 0.9**step)
    entry = jfn.entries[-1]
    options = compiler.examine._options(jfn, "jit")
    computation = _reading_device_scalars(options, entry.traces, (4, 5), torch.device("cpu"), False)
    assert [p.name for p in entry.traces[-1].inputs] == ["p", "g", "m", "v", "step", "lr"]
    assert [type(p).__name__ for p in entry.traces[-1].inputs[4:]] == ["TensorProxy", "TensorProxy"]
    for step in (4, 5, 50):
        lr = 1e-2 * 0.9**step
        computation(*state, torch.tensor(step), torch.tensor(lr, dtype=torch.float64))
        _adam(*eager, step, lr)
        for got, want in zip(state, eager):
            torch.testing.assert_close(got, want)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_an_optimizer_step_under_a_schedule_replays_with_its_step_and_rate_in_device_scalars(dtype) -> None:
    torch.manual_seed(0)
    state = [torch.randn(1000, 3, device="cuda", dtype=dtype) for _ in range(3)] + [
        torch.rand(1000, 3, device="cuda", dtype=dtype)
    ]
    expected = [t.clone() for t in state]
    # bf16: eager rounds each in-place intermediate to bf16, the fusion holds them in float32, and
    # the difference grows step after step; the reference is then the same fusion run without
    # graphs, its numbers passed as numbers (float32 is checked against eager itself)
    reference = _adam if dtype == torch.float32 else compiler.jit(_adam, cuda_graphs=False)
    jfn = compiler.jit(_adam)
    for step in range(1, 3 * STEPS):
        lr = 1e-2 * 0.9**step  # a schedule: a new rate and a new step count every call
        jfn(state[0], state[1], state[2], state[3], step, lr)
        reference(expected[0], expected[1], expected[2], expected[3], step, lr)
        for got, want in zip(state, expected):
            torch.testing.assert_close(got, want)
    stats = jfn.entries[-1].computation.stats
    assert stats.reason is None and stats.replays >= STEPS, _stats(jfn)
    assert "device scalars, as they change every call: 'step', 'lr'" in _stats(jfn)
