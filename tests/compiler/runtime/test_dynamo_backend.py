"""The "fusebench" torch.compile backend: registered by `import compiler` without importing
dynamo, and FX graphs compiled by this compiler match eager."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch
from torch import nn

import compiler
from suites._models.gpt import GPT, GPTConfig

ROOT = Path(__file__).resolve().parents[3]


def test_import_compiler_registers_the_backend_without_importing_dynamo() -> None:
    program = (
        "import sys, torch, compiler\n"
        "assert 'torch._dynamo' not in sys.modules, 'import compiler imported dynamo'\n"
        "f = torch.compile(lambda x: (x.sin() + 1).sum(-1), backend='fusebench')\n"
        "x = torch.randn(3, 4)\n"
        "torch.testing.assert_close(f(x), (x.sin() + 1).sum(-1))\n"
        "import torch._dynamo\n"
        "assert 'fusebench' in torch._dynamo.list_backends()\n"
    )
    result = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]


def test_the_backend_is_this_compiler() -> None:
    graphs = []

    def counting(graph_module, example_inputs):
        compiled = compiler.dynamo_backend(graph_module, example_inputs)
        graphs.append(compiled)
        return compiled

    torch._dynamo.reset()
    f = torch.compile(lambda x, y: torch.relu(x @ y) * 2, backend=counting)
    x, y = torch.randn(3, 4), torch.randn(4, 5)
    torch.testing.assert_close(f(x, y), torch.relu(x @ y) * 2)
    assert len(graphs) == 1 and isinstance(graphs[0], compiler.JittedModule)
    assert compiler.cache_stats(graphs[0]).misses == 1
    assert "prims.matmul" in str(compiler.last_traces(graphs[0])[-1])


def test_the_graphs_the_backend_compiled_can_be_looked_into() -> None:
    from compiler.runtime import dynamo

    first = dynamo.graphs_compiled()
    torch._dynamo.reset()
    f = torch.compile(lambda x: (x.sin() + 1).cos(), backend="fusebench")
    x = torch.randn(8)
    torch.testing.assert_close(f(x), (x.sin() + 1).cos())
    (graph,) = dynamo.compiled_graphs(first)
    assert dynamo.graphs_compiled() == first + 1
    assert "prims.sin" in str(compiler.last_traces(graph)[-1])
    assert dynamo.compiled_graphs(first + 1) == []


def test_mlp_and_tiny_gpt_through_the_backend_match_eager() -> None:
    torch._dynamo.reset()
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(8, 32), nn.GELU(approximate="tanh"), nn.Linear(32, 8), nn.LayerNorm(8))
    x = torch.randn(5, 8)
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(mlp, backend="fusebench")(x), mlp(x))
    gpt = GPT(GPTConfig.tiny())
    compiled = torch.compile(gpt, backend="fusebench")
    tokens, targets = torch.randint(0, 96, (2, 12)), torch.randint(0, 96, (2, 12))
    with torch.no_grad():
        out, expected = compiled(tokens, targets), gpt(tokens, targets)
    assert set(out) == {"logits", "loss"}
    torch.testing.assert_close(out["logits"], expected["logits"])
    torch.testing.assert_close(out["loss"], expected["loss"])


def test_a_dynamic_graph_compiles_twice_for_every_length_and_can_be_examined() -> None:
    from compiler.runtime import dynamo
    from suites.dynamic_lengths import norm_mlp

    torch._dynamo.reset()
    g = torch.Generator().manual_seed(0)
    weights = [torch.randn(64, 32, generator=g) * 0.1, torch.randn(64, generator=g)]
    weights += [torch.randn(32, 64, generator=g) * 0.1, torch.randn(32, generator=g)]
    since = dynamo.graphs_compiled()
    compiled = torch.compile(norm_mlp, backend="fusebench")
    for length in (3, 5, 7, 9, 11, 13):
        x = torch.randn(2, length, 32, generator=g)
        torch.testing.assert_close(compiled(x, *weights), norm_mlp(x, *weights))
    # dynamo's static graph, then its dynamic one, whose length argument and x's size our entries
    # make symbolic on their first miss: not one entry per length
    static, dynamic = dynamo.compiled_graphs(since)
    assert compiler.cache_stats(static).misses == 1 and compiler.cache_stats(dynamic).misses == 2
    (recompilation,) = compiler.examine.recompilations(dynamic)
    assert any(name.endswith(".size(1)") for name in recompilation.made_symbolic)
