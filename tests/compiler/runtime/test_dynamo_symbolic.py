"""Dynamo's helpers for symbolic sizes (`torch.sym_sum`) trace as arithmetic on this compiler's
symbolic sizes, so a dynamic graph that uses them compiles twice, not once per size."""

from __future__ import annotations

import torch

import compiler
from compiler.runtime import dynamo


def _joined_total(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    length = sum([x.shape[0], y.shape[0], 1])  # dynamo records torch.sym_sum in a dynamic graph
    return torch.cat([x, y], 0).sum() * length


def test_a_graph_with_sym_sum_gets_symbolic_sizes() -> None:
    torch._dynamo.reset()
    first = dynamo.graphs_compiled()
    compiled = torch.compile(_joined_total, backend="fusebench")
    g = torch.Generator().manual_seed(0)
    for n in range(2, 8):
        x, y = torch.randn(n, generator=g), torch.randn(n + 1, generator=g)
        torch.testing.assert_close(compiled(x, y), _joined_total(x, y))
    static, dynamic = dynamo.compiled_graphs(first)
    assert "sym_sum" in dynamic.module.code
    assert compiler.cache_stats(static).misses == 1 and compiler.cache_stats(dynamic).misses == 2
    (recompilation,) = compiler.examine.recompilations(dynamic)
    assert recompilation.made_symbolic, "the sizes stayed constant"
