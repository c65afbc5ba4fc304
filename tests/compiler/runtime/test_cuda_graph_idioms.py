"""jit(cuda_graphs=True) on the usual training-loop idioms (on a GPU): gradients reset with
`.grad = None` every step, a scalar loss's `backward()`, optimizer state created on the first
step, a learning rate that changes every step (read from a device scalar). Each loop matches
eager step after step and, after its warm-up, replays: no capture per step, no copies of what
callers hold."""

from __future__ import annotations

import dataclasses
import warnings

import pytest
import torch

import compiler
from compiler.runtime.cuda_graphs import CudaGraphWarning
from compiler.runtime.graph_capture import capturing

STEPS = 12


@pytest.mark.gpu
def test_a_capture_keeps_the_cached_memory_and_replays_on_the_current_stream() -> None:
    block = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
    del block  # cached by the allocator: a capture must not hand it back to the driver
    reserved = torch.cuda.memory_reserved()
    x = torch.ones(4, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with capturing(graph):
        y = x * 2
    assert torch.cuda.memory_reserved() >= reserved
    for value in (3.0, 5.0):
        x.fill_(value)
        graph.replay()
        assert y.tolist() == [2 * value] * 4


def _rmsnorm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.square().mean(-1, keepdim=True) + 1e-6) * w


def _steady(stats: object) -> bool:
    return stats.held_captures == 0 and stats.lent_copies == 0 and stats.cloned_outputs == 0


@pytest.mark.gpu
@pytest.mark.parametrize("loss", ["cotangent", "scalar"])
def test_a_loop_that_sets_grads_to_none_replays_its_forward_and_backward(loss: str) -> None:
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(512, 1024, device="cuda", generator=gen).requires_grad_()  # 2 MiB: keyed by address
    w = torch.randn(1024, device="cuda", generator=gen).requires_grad_()
    cotangent = torch.randn(512, 1024, device="cuda", generator=gen)
    x_eager, w_eager = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    jfn = compiler.jit(_rmsnorm, cuda_graphs=True)
    for _ in range(STEPS):
        for params in ((x, w), (x_eager, w_eager)):
            for p in params:
                p.grad = None
            y = (jfn if params[0] is x else _rmsnorm)(*params)
            if loss == "cotangent":
                y.backward(cotangent)
            else:  # the cotangent is a fresh temporary of eager's backward every step
                y.square().mean().backward()
            with torch.no_grad():  # an SGD step: the parameters keep their memory
                params[1].sub_(0.1 * params[1].grad)
        for got, want in ((x.grad, x_eager.grad), (w.grad, w_eager.grad), (w, w_eager)):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)  # sums of 512 rows, in another order
    (entry,) = jfn.entries
    forward = entry.computation.forward.stats
    backwards = [b.stats for b in entry.computation.backwards.values()]
    listing = str(compiler.examine.cuda_graphs(jfn))
    # one instance, or two alternating where the previous step's output is alive during the next forward
    assert forward.captures <= 2 and forward.replays == STEPS - 1 and _steady(forward), listing
    for backward in backwards:  # one graph per forward instance whose saved values it reads
        assert backward.captures <= 2 + (loss == "scalar") and _steady(backward), listing
        # a fresh cotangent at a new address each step: copied after `_MOVES` such calls in a row
        assert backward.replays >= STEPS - (4 if loss == "cotangent" else 6), listing


def _adam(params: list, grads: list, ms: list, vs: list, lr: torch.Tensor, c1: torch.Tensor, c2: torch.Tensor):
    for p, g, m, v in zip(params, grads, ms, vs):
        m.mul_(0.9).add_(g, alpha=0.1)
        v.mul_(0.999).addcmul_(g, g, value=0.001)
        p.sub_(lr * (m / c1) / ((v / c2).sqrt() + 1e-8))


def _model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 64)).cuda()


@pytest.mark.gpu
def test_an_optimizer_step_over_lazy_state_with_a_scheduled_learning_rate_replays() -> None:
    models = {"jit": _model(0), "eager": _model(0)}
    step_fns = {"jit": compiler.jit(_adam, cuda_graphs=True), "eager": _adam}
    states: dict[str, tuple[list, list]] = {}
    # device scalars, rewritten in place each step: the graph reads their memory
    scalars = {name: [torch.zeros((), device="cuda") for _ in range(3)] for name in models}
    data = torch.randn(32, 64, device="cuda")
    steady_from = STEPS + 1  # the last 4 steps: every gradient address the allocator cycles through seen
    for step in range(1, STEPS + 5):
        if step == steady_from:
            before = dataclasses.replace(step_fns["jit"].entries[0].computation.stats)
        for name, model in models.items():
            params = list(model.parameters())
            for p in params:
                p.grad = None
            model(data).square().mean().backward()
            if name not in states:  # created on the first step, as torch.optim does
                states[name] = ([torch.zeros_like(p) for p in params], [torch.zeros_like(p) for p in params])
            lr, c1, c2 = scalars[name]
            lr.fill_(1e-2 * (0.9**step))  # a learning-rate schedule
            c1.fill_(1 - 0.9**step)
            c2.fill_(1 - 0.999**step)
            with torch.no_grad():
                step_fns[name](params, [p.grad for p in params], *states[name], lr, c1, c2)
        for got, want in zip(models["jit"].parameters(), models["eager"].parameters()):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    (entry,) = step_fns["jit"].entries
    stats = entry.computation.stats
    listing = str(compiler.examine.cuda_graphs(step_fns["jit"]))
    # fresh gradients come at the addresses the caching allocator hands out, which the eager model's
    # steps in between shift: a few address keys, each captured once, then every step replays
    assert _steady(stats) and stats.captures <= 4, listing
    assert (stats.captures, stats.ungraphed_calls) == (before.captures, before.ungraphed_calls), listing
    assert stats.replays == before.replays + 4, listing


def _sgd(p: torch.Tensor, g: torch.Tensor, lr: float) -> None:
    p.sub_(g * lr)


@pytest.mark.gpu
@pytest.mark.parametrize("graphs", [True, None], ids=["explicit", "automatic"])
def test_a_python_float_learning_rate_changing_every_step_replays_from_a_device_scalar(graphs) -> None:
    p, g = torch.randn(256, device="cuda"), torch.randn(256, device="cuda")
    want = p.clone()
    jfn = compiler.jit(_sgd, cuda_graphs=graphs)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CudaGraphWarning)
        for step in range(STEPS):
            lr = 0.1 * 0.9**step
            jfn(p, g, lr)
            want.sub_(g * lr)
            torch.testing.assert_close(p, want)
    stats = jfn.entries[-1].computation.stats
    assert stats.device_scalars == "'lr'" and stats.replays >= 8, str(stats)
    assert compiler.cache_stats(jfn).misses == 2  # the value, then a symbolic lr (automatic dynamic)


def _decode(cache, k, cos, pos):
    cache[:, :, pos : pos + 1] = (k * cos[pos]).to(cache.dtype)  # written, and a table read, at the position
    return cache.float().sum(-1)


@pytest.mark.gpu
@pytest.mark.parametrize("graphs", [True, None], ids=["explicit", "automatic"])
def test_a_decode_loop_writing_a_cache_at_a_python_int_position_replays_one_graph(graphs) -> None:
    cache = torch.zeros(2, 4, 32, 16, device="cuda", dtype=torch.bfloat16)
    cos = torch.randn(32, 16, device="cuda")
    want = cache.clone()
    jfn = compiler.jit(_decode, cuda_graphs=graphs)
    k = torch.empty(2, 4, 1, 16, device="cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("error", CudaGraphWarning)
        for pos in range(2 * STEPS):  # 24 positions of the 32: six calls before the graphs, then replays
            k.copy_(torch.randn(2, 4, 1, 16, device="cuda"))  # the new keys in a static buffer
            torch.testing.assert_close(jfn(cache, k, cos, pos), _decode(want, k, cos, pos))
            torch.testing.assert_close(cache, want)
    stats = jfn.entries[-1].computation.stats
    assert stats.device_scalars == "'pos'" and stats.replays >= 8, str(stats)
