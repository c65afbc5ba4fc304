"""jit(cuda_graphs=True): a clear error without CUDA, a fallback with a reason for CPU inputs, and
(on a GPU) replays whose in-place updates and outputs match eager call after call."""

from __future__ import annotations

import types
import warnings

import pytest
import torch
from torch.utils import _pytree as pytree

import compiler
from compiler.core.ir import NumberProxy
from compiler.prims import Prim
from compiler.runtime.cuda_graphs import (
    CudaGraphWarning,
    GraphedComputation,
    changed_numbers,
    changing_numbers_message,
    input_names,
    unavailable_reason,
)
from compiler.runtime.graph_capture import Lent, _unflattener


def update(p: torch.Tensor, m: torch.Tensor, g: torch.Tensor, lr: float):
    m.mul_(0.9).add_(g, alpha=0.1)
    p.sub_(m * lr / (g.abs() + 1e-8).sqrt())
    return p.square().sum(), m.sin()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised where CUDA is unavailable")
def test_without_cuda_jit_says_cuda_graphs_need_cuda() -> None:
    with pytest.raises(ValueError, match=r"cuda_graphs=True\): CUDA graphs need CUDA"):
        compiler.jit(update, cuda_graphs=True)
    assert unavailable_reason() is not None


def test_cpu_inputs_run_without_graphs_and_say_why() -> None:
    graphed = GraphedComputation(lambda x, k: x * k)
    x = torch.randn(3)
    for _ in range(3):
        torch.testing.assert_close(graphed(x, 2.0), x * 2.0)
    assert (graphed.stats.captures, graphed.stats.replays, graphed.stats.ungraphed_calls) == (0, 0, 3)
    assert "an input is on cpu" in str(graphed.stats)


@pytest.mark.parametrize(
    "tree", [((1, 2), (3, [4, 5]), None), 7, (), [1], ((1,),), types.SimpleNamespace(a=1), {"a": (1, 2)}]
)
def test_a_replay_rebuilds_its_result_as_the_computation_returned_it(tree: object) -> None:
    leaves, spec = pytree.tree_flatten(tree)
    assert _unflattener(spec)(leaves) == tree


def _state(seed: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(64, 33, generator=gen).cuda() for _ in range(3)]


@pytest.mark.gpu
@pytest.mark.parametrize("seed", [0, 1])
def test_replays_update_in_place_and_return_fresh_outputs(seed: int) -> None:
    p, m, g = _state(seed)
    ep, em, eg = (t.clone() for t in (p, m, g))
    jfn = compiler.jit(update, cuda_graphs=True)
    results = []
    for _ in range(6):
        g.copy_(torch.randn_like(g))  # new gradient values, same memory: the graph reads them
        eg.copy_(g)
        got, want = jfn(p, m, g, 1e-2), update(ep, em, eg, 1e-2)
        results.append((got, want))
        torch.testing.assert_close(p, ep)
        torch.testing.assert_close(m, em)
    for got, want in results:  # earlier outputs were not overwritten by later replays
        torch.testing.assert_close(got, want)
    (stats,) = [e.computation.stats for e in jfn.entries]
    # warm-up; A; B (A's outputs are kept); C, A left to `results`, outputs copied from then on
    assert (stats.captures, stats.replays, stats.ungraphed_calls) == (3, 5, 1)
    assert "3 captures, 5 replays" in str(compiler.examine.cuda_graphs(jfn))


def _sin2(x: torch.Tensor) -> torch.Tensor:
    return x.sin() * 2


@pytest.mark.gpu
def test_outputs_are_the_graphs_own_memory_while_nobody_keeps_them() -> None:
    x = torch.randn(64, 33, device="cuda")
    jfn = compiler.jit(_sin2, cuda_graphs=True)
    addresses = []
    for _ in range(7):  # `y` of the previous call is alive during each call: two instances alternate
        x.copy_(torch.randn_like(x))
        y = jfn(x)
        torch.testing.assert_close(y, _sin2(x))
        addresses.append(y.data_ptr())
    (entry,) = jfn.entries
    assert (entry.computation.stats.captures, entry.computation.stats.replays) == (2, 6)
    assert addresses[1::2][1:] == [addresses[1]] * 2 and addresses[2::2] == [addresses[2]] * 3  # no copies
    y.add_(1)  # the caller's result is the caller's: written in place, never overwritten by a replay
    written = y.clone()
    for _ in range(3):  # each result dropped at once: the instance `y` does not hold replays
        x.copy_(torch.randn_like(x))
        torch.testing.assert_close(jfn(x), _sin2(x))
    torch.testing.assert_close(y, written)
    assert entry.computation.stats.captures == 2


@pytest.mark.gpu
def test_new_addresses_capture_again() -> None:
    jfn = compiler.jit(update, cuda_graphs=True)
    first, second = _state(2), _state(3)
    expected = [[t.clone() for t in first], [t.clone() for t in second]]
    for _ in range(3):
        for state, eager in zip((first, second), expected):
            torch.testing.assert_close(jfn(*state, 1e-2), update(*eager, 1e-2))
            torch.testing.assert_close(state[0], eager[0])
    (stats,) = [e.computation.stats for e in jfn.entries]
    assert (stats.captures, stats.replays) == (2, 4)


@pytest.mark.gpu
def test_a_number_that_changes_every_call_is_read_from_a_device_scalar_and_replays() -> None:
    jfn = compiler.jit(update, cuda_graphs=True)
    state = _state(4)
    eager = [t.clone() for t in state]
    with warnings.catch_warnings():
        warnings.simplefilter("error", CudaGraphWarning)
        for step in range(12):
            lr = 1e-2 * (step + 1)  # a new learning rate every call, as a schedule would give
            torch.testing.assert_close(jfn(*state, lr), update(*eager, lr))
            torch.testing.assert_close(state[0], eager[0])
    stats = jfn.entries[-1].computation.stats  # lr constant in the first entry, symbolic in the second
    assert stats.replays >= 4 and stats.device_scalars == "'lr'", str(stats)


def _filled(x: torch.Tensor, fill: float) -> torch.Tensor:
    return x * 2 + torch.full((x.shape[0],), fill, device=x.device)


@pytest.mark.gpu
def test_a_changing_number_that_cannot_be_a_device_scalar_is_named_once_and_the_results_stay_right() -> None:
    jfn = compiler.jit(_filled, cuda_graphs=True)
    x = torch.randn(64, device="cuda")
    with pytest.warns(CudaGraphWarning, match=r"number inputs 'fill' took new values.*read by full") as caught:
        for step in range(8):
            torch.testing.assert_close(jfn(x, float(step)), _filled(x, float(step)))
    assert len([w for w in caught if issubclass(w.category, CudaGraphWarning)]) == 1
    stats = [e.computation.stats for e in jfn.entries]
    assert [s.replays for s in stats] == [0, 0]
    assert "number inputs that change from call to call: 'fill'" in str(stats[-1])


def test_only_keys_that_differ_in_numbers_alone_count_as_changing_numbers() -> None:
    key = ((1, 2), ((3, 1), (1,)), ((float, 0.1), (int, 4)))
    assert changed_numbers(None, key) == []
    assert changed_numbers(key, ((1, 2), ((3, 1), (1,)), ((float, 0.2), (int, 4)))) == [0]
    assert changed_numbers(key, ((1, 9), ((3, 1), (1,)), ((float, 0.2), (int, 5)))) == []  # another address
    assert changed_numbers(key[:2], key[:2]) == []  # no number inputs
    assert input_names(update, 4) == ["'p'", "'m'", "'g'", "'lr'"]
    assert input_names(len, 2) == ["input 0", "input 1"]


def test_changing_sizes_are_told_apart_from_changing_numbers() -> None:
    sizes = changing_numbers_message(["'x_size1'"], frozenset({"x_size1"}))
    assert "tensor sizes 'x_size1' took new values" in sizes and "fixed sizes" in sizes and "0-d" not in sizes
    mixed = changing_numbers_message(["'lr'", "'x_size1'"], frozenset({"x_size1"}))
    assert "number inputs 'lr', 'x_size1' took new values" in mixed and "0-d CUDA tensors" in mixed


@pytest.mark.gpu
def test_graphed_entries_over_changing_lengths_compile_twice_and_replay_each_length() -> None:
    jfn = compiler.jit(lambda x, w: (x @ w).softmax(-1) * x.shape[1], cuda_graphs=True)
    w = torch.randn(16, 16, device="cuda")
    inputs = {n: torch.randn(2, n, 16, device="cuda") for n in (5, 9, 12)}
    for _ in range(3):  # a length's graph is captured on its second call and replayed after
        for x in inputs.values():
            torch.testing.assert_close(jfn(x, w), (x @ w).softmax(-1) * x.shape[1])
    assert compiler.cache_stats(jfn).misses == 2  # the dim-1 size is symbolic, its strides too
    bsyms = jfn.entries[1].prologue_trace.bsyms
    (strides,) = [b.args[1] for b in bsyms if b.sym is Prim.CHECK_STRIDES and b.args[0].name == "x"]
    assert isinstance(strides[0], NumberProxy) and strides[1:] == (16, 1)  # (16 * x_size1, 16, 1)
    assert jfn.entries[1].computation.stats.replays >= 2


@pytest.mark.gpu
def test_a_returned_argument_is_the_updated_memory() -> None:
    def bump(x: torch.Tensor) -> torch.Tensor:
        return x.add_(1)

    x = torch.zeros(8, device="cuda")
    jfn = compiler.jit(bump, cuda_graphs=True)
    outputs = [jfn(x) for _ in range(4)]
    torch.testing.assert_close(x, torch.full_like(x, 4.0))
    torch.testing.assert_close(outputs[-1], x)


def test_lent_buffers_are_copied_before_an_overwrite_unless_released() -> None:
    # the graph's own memory, a saved input (the caller's memory: a replay does not write it), a number
    graph = types.SimpleNamespace(generation=0, lent_owned=[True, False, False])
    buffer, saved_input = torch.arange(4.0), torch.ones(3)
    lent = Lent([buffer, saved_input, 3], graph)
    assert lent.keep()  # the graph is about to overwrite `buffer`: the borrower gets a copy
    buffer.zero_()
    graph.generation += 1
    assert lent.borrow()[0].tolist() == [0.0, 1.0, 2.0, 3.0] and lent.borrow()[2] == 3
    assert lent.borrow()[1] is saved_input  # not copied: a pass over the input would buy nothing
    released = Lent([buffer, saved_input, 3], graph)
    released.release()
    assert not released.keep()  # released: nothing copied
    assert released.borrow()[0] is buffer
    graph.generation += 1  # overwritten since: a second backward must not read it
    with pytest.raises(RuntimeError, match=r"retain_graph=True\) after its CUDA-graphed forward was replayed"):
        released.borrow()


def _loss(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x @ w + b, approximate="tanh").square().mean()


@pytest.mark.gpu
@pytest.mark.parametrize("seed", [0, 1])
def test_a_training_step_replays_its_forward_and_backward_graphs(seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(32, 64, generator=gen).cuda()
    w, b = torch.randn(64, 48, generator=gen).cuda(), torch.randn(48, generator=gen).cuda()
    params = [w.requires_grad_(), b.requires_grad_()]
    eager_params = [w.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()]
    jfn = compiler.jit(_loss, cuda_graphs=True)
    losses = []
    for _ in range(8):  # each step's loss and gradients are alive during the next step's calls
        x.copy_(torch.randn(32, 64, generator=gen))  # new data in the same memory
        loss = jfn(x, *params)
        grads = torch.autograd.grad(loss, params)
        want = _loss(x, *eager_params)
        want_grads = torch.autograd.grad(want, eager_params)
        torch.testing.assert_close(loss, want)
        for got, expected in zip(grads, want_grads):
            torch.testing.assert_close(got, expected)
        with torch.no_grad():  # an optimizer step: the parameters keep their memory
            for p, e, g in zip(params, eager_params, want_grads):
                p.sub_(0.1 * g)
                e.sub_(0.1 * g)
        losses.append((loss.clone(), want))
    for loss, want in losses:  # earlier losses were not overwritten by later replays
        torch.testing.assert_close(loss, want)
    (entry,) = jfn.entries
    forward = entry.computation.forward.stats
    (backward,) = [b.stats for b in entry.computation.backwards.values()]
    # forward: warm-up, then instances A and B alternate (the previous loss is alive); the backward
    # reads A's or B's saved values: one graph for each, warmed up once and replayed from then on
    assert (forward.captures, forward.replays, forward.ungraphed_calls) == (2, 7, 1)
    assert (backward.captures, backward.replays, backward.ungraphed_calls) == (2, 5, 3)
    assert "forward: 2 captures, 7 replays, 1 calls without a graph; backward: 2 captures, 5 replays" in str(
        compiler.examine.cuda_graphs(jfn)
    )


def _scaled_column_sums(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return (x.sum(0) * w).square().sum()  # w's gradient reads x.sum(0): a saved reduction, not x


@pytest.mark.gpu
def test_two_forwards_before_their_backwards_and_a_second_backward() -> None:
    x, w = torch.randn(16, 8, device="cuda"), torch.randn(8, device="cuda", requires_grad=True)
    jfn = compiler.jit(_scaled_column_sums, cuda_graphs=True)
    for _ in range(3):  # warm-up, capture, replay
        torch.autograd.grad(jfn(x, w), w)
    values = [torch.randn(16, 8, device="cuda") for _ in range(2)]
    losses = []
    for value in values:  # the second replay overwrites the sums the first one saved
        x.copy_(value)
        losses.append(jfn(x, w) * 1.0)  # (the graph's output itself is not kept: its instance replays)
    for loss, value in zip(losses, values):
        (got,) = torch.autograd.grad(loss, w)
        (want,) = torch.autograd.grad(_scaled_column_sums(value, w), w)
        torch.testing.assert_close(got, want)
    x.copy_(values[0])
    loss = jfn(x, w) * 1.0
    torch.autograd.grad(loss, w, retain_graph=True)
    torch.autograd.grad(loss, w, retain_graph=True)  # nothing replayed in between: still right
    jfn(x, w)
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        torch.autograd.grad(loss, w)
    assert compiler.examine.cuda_graphs(jfn)


def _gelu(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x, approximate="tanh")


@pytest.mark.gpu
def test_a_large_cotangent_is_keyed_by_its_address_not_copied() -> None:
    x = torch.randn(512, 1024, device="cuda", requires_grad=True)
    g = torch.empty(512, 1024, device="cuda")  # 2 MiB: a copy into a static buffer would cost a pass over it
    jfn = compiler.jit(_gelu, cuda_graphs=True)
    for _ in range(6):
        g.copy_(torch.randn_like(g))  # the same buffer with new values: the backward's graph reads them
        (got,) = torch.autograd.grad(jfn(x), x, g)
        (want,) = torch.autograd.grad(_gelu(x), x, g)
        torch.testing.assert_close(got, want)
    (entry,) = jfn.entries
    (backward,) = entry.computation.backwards.values()
    # GELU saves x itself, so the backward's key (x, g) is the same every step: one warm-up, then replays
    assert backward._copied == [] and (backward.stats.ungraphed_calls, backward.stats.replays) == (1, 5)
    for _ in range(3):  # a fresh cotangent each step: a new address is a new key, still right
        fresh = torch.randn_like(g)
        (got,) = torch.autograd.grad(jfn(x), x, fresh)
        (want,) = torch.autograd.grad(_gelu(x), x, fresh)
        torch.testing.assert_close(got, want)


@pytest.mark.gpu
def test_the_same_memory_with_other_strides_is_another_entry_not_a_stale_replay() -> None:
    square = torch.randn(64, 64, device="cuda")
    jfn = compiler.jit(_sin2, cuda_graphs=True)
    for _ in range(3):
        torch.testing.assert_close(jfn(square), _sin2(square))
    for _ in range(3):  # the same address and shape: a graph keyed by address alone would replay
        torch.testing.assert_close(jfn(square.t()), _sin2(square.t()))
    first, second = jfn.entries
    assert "layout of x: expected (64, 1), got (1, 64)" in str(compiler.examine.recompilations(jfn))
    assert first.computation.strides_guarded and first.computation.key((square,))[1] is None
    assert (second.computation.stats.captures, second.computation.stats.replays) == (1, 2)


def _keyed_by_address(static_tail: int) -> GraphedComputation:
    """A graphed backward of (saved, cotangent) whose large cotangent is keyed by its address (as
    `key` sets it up on a first call with CUDA tensors)."""
    graphed = GraphedComputation(lambda saved, cotangent: saved * cotangent, static_tail=static_tail)
    graphed._input_count, graphed._keyed_positions = 2, [0, 1]
    return graphed


def test_cotangents_at_a_new_address_every_call_are_copied_from_then_on() -> None:
    graphed = _keyed_by_address(static_tail=1)
    for cotangent_address in (100, 200, 300, 400):  # the saved value stays, the cotangent moves
        graphed._note_numbers(((7, cotangent_address), None), ())
    assert graphed._copied == [1] and graphed._keyed_positions == [0] and graphed.stats.copied_cotangents == 1
    assert graphed._keyed((5, 6)) == (5,) and "cotangents copied before each replay" in str(graphed.stats)


def test_cotangent_moves_interrupted_by_other_changes_keep_the_cotangent_keyed() -> None:
    graphed = _keyed_by_address(static_tail=1)
    for saved_address, cotangent_address in ((7, 100), (7, 200), (8, 300), (8, 400), (9, 400)):
        graphed._note_numbers(((saved_address, cotangent_address), None), ())
    assert graphed._copied == [] and graphed._keyed_positions == [0, 1] and graphed.stats.copied_cotangents == 0
    forward = _keyed_by_address(static_tail=0)  # a forward: nothing of it is a cotangent
    for address in (100, 200, 300, 400):
        forward._note_numbers(((7, address), None), ())
    assert forward._copied == [] and forward._keyed_positions == [0, 1]
