"""torch.optim's steps through the "fusebench" backend: dynamo decomposes `addcmul_`, `addcdiv_`
(and `add_` with a tensor alpha) into Inductor's `prims.fma`, which the backend compiles as a
multiply and an add: the step's graph compiles whole, without fallbacks, and matches eager."""

from __future__ import annotations

import pytest
import torch

import compiler
from compiler.runtime import dynamo
from suites.adam_step import adam_step

SHAPES = [(8, 4), (4,), (8, 4), (1, 3)]


def _parameters(seed: int) -> list[torch.nn.Parameter]:
    gen = torch.Generator().manual_seed(seed)
    params = [torch.nn.Parameter(torch.randn(shape, generator=gen)) for shape in SHAPES]
    for p in params:
        p.grad = torch.randn(p.shape, generator=gen)
    return params


def _compiled_whole(first_graph: int, first_fallback: int) -> list[dynamo.DynamoGraph]:
    """The graphs compiled since `first_graph`, after checking none ran split or eagerly."""
    assert compiler.examine.fallbacks(since=first_fallback) == []
    graphs = dynamo.compiled_graphs(first_graph)
    assert graphs and all(isinstance(g, dynamo.DynamoGraph) and g.split is None for g in graphs)
    return graphs


@pytest.mark.parametrize(
    ("optimizer", "options", "seed"),
    [
        (torch.optim.Adam, {}, 0),
        (torch.optim.Adam, {}, 1),
        (torch.optim.AdamW, {"weight_decay": 0.1}, 2),
        (torch.optim.Adam, {"weight_decay": 0.1, "amsgrad": True}, 3),
    ],
)
def test_an_optimizer_step_compiles_whole_and_matches_eager(optimizer: type, options: dict, seed: int) -> None:
    torch._dynamo.reset()
    first_graph, first_fallback = dynamo.graphs_compiled(), compiler.examine.fallbacks_recorded()
    compiled_params, eager_params = _parameters(seed), _parameters(seed)
    compiled = optimizer(compiled_params, lr=1e-2, **options)
    eager = optimizer(eager_params, lr=1e-2, **options)
    step = torch.compile(compiled.step, backend="fusebench")
    for _ in range(3):
        step()
        eager.step()
        for actual, expected in zip(compiled_params, eager_params):
            torch.testing.assert_close(actual, expected)
    graphs = _compiled_whole(first_graph, first_fallback)
    assert any("_fma" in graph.module.code for graph in graphs)  # dynamo's prims.fma, rewritten


def test_the_adam_step_suite_function_compiles_whole_and_matches_eager() -> None:
    torch._dynamo.reset()
    first_graph, first_fallback = dynamo.graphs_compiled(), compiler.examine.fallbacks_recorded()
    gen = torch.Generator().manual_seed(2)

    def state() -> list[list[torch.Tensor]]:
        tensors = [[torch.randn(shape, generator=gen) for shape in SHAPES] for _ in range(3)]
        return [*tensors[:2], tensors[2], [t.abs() for t in tensors[2]]]

    params, grads, exp_avgs, exp_avg_sqs = state()
    expected = [[t.clone() for t in ts] for ts in (params, grads, exp_avgs, exp_avg_sqs)]
    compiled = torch.compile(adam_step, backend="fusebench")
    compiled(params, grads, exp_avgs, exp_avg_sqs, 3, 1e-2, 0.9, 0.999, 1e-8)
    adam_step(*expected, 3, 1e-2, 0.9, 0.999, 1e-8)
    for actual, reference in zip((params, grads, exp_avgs, exp_avg_sqs), expected):
        for a, r in zip(actual, reference):
            torch.testing.assert_close(a, r)
    (graph,) = _compiled_whole(first_graph, first_fallback)
    assert "_fma" in graph.module.code  # dynamo's prims.fma, rewritten
    assert "prims.add" in str(compiler.last_traces(graph)[-1])
