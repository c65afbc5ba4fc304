"""Training through compiled models: `jitted(x, targets)['loss'].backward()` fills the module's
`.grad` as eager does, and forward + backward + AdamW over several steps (dropout on, same seeds)
matches eager; the same through the dynamo backend, whose graphs run this compiler's autodiff
(not aot_autograd)."""

from __future__ import annotations

import copy

import pytest
import torch

import compiler
from suites._models.gpt import GPT, GPTConfig
from suites._models.llama import LlamaBlock, LlamaConfig

TRAINING_TOLERANCE = {"rtol": 1e-3, "atol": 5e-4}  # AdamW's first steps move by about lr * sign(grad)


def _batch(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    tokens, targets = torch.randint(0, 96, (2, 16), generator=gen), torch.randint(0, 96, (2, 16), generator=gen)
    targets[0, :3] = -1
    return tokens, targets


def test_a_training_loop_with_dropout_matches_eager() -> None:
    torch.manual_seed(0)
    eager = GPT(GPTConfig(block_size=64, vocab_size=96, n_layer=2, n_head=2, n_embd=32, dropout=0.1))
    model = copy.deepcopy(eager)
    jitted = compiler.jit(model)
    optimizers = [torch.optim.AdamW(m.parameters(), lr=1e-2) for m in (eager, model)]
    for step in range(3):
        tokens, targets = _batch(step)
        losses = []
        for run, optimizer in zip((eager, jitted), optimizers):
            torch.manual_seed(100 + step)
            loss = run(tokens, targets)["loss"]
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss.detach())
        torch.testing.assert_close(losses[1], losses[0])
    for compiled, expected in zip(model.parameters(), eager.parameters()):
        torch.testing.assert_close(compiled, expected, **TRAINING_TOLERANCE)
    assert compiler.cache_stats(jitted).misses == 1
    backward = str(compiler.last_backward_traces(jitted)[-1])  # the compiler's own backward ran
    assert "dropout_noise" not in backward  # the forward's draws are saved, never drawn again


@pytest.mark.parametrize("through", ["jit", "dynamo"])
def test_gradients_of_gpt_and_llama_match_eager(through: str) -> None:
    torch._dynamo.reset()
    torch.manual_seed(1)
    tokens, targets = _batch(7)
    x, positions = torch.randn(2, 6, 32), torch.arange(6)
    for eager, inputs, loss_of in [
        (GPT(GPTConfig.tiny()), (tokens, targets), lambda out: out["loss"]),
        (LlamaBlock(LlamaConfig.tiny()), (x, positions), lambda out: out.square().mean()),
    ]:
        model = copy.deepcopy(eager)
        graphs = []

        def backend(graph_module, example_inputs, graphs=graphs):
            graphs.append(compiler.dynamo_backend(graph_module, example_inputs))
            return graphs[-1]

        compiled = compiler.jit(model) if through == "jit" else torch.compile(model, backend=backend)
        loss_of(compiled(*inputs)).backward()
        loss_of(eager(*inputs)).backward()
        for (name, got), want in zip(model.named_parameters(), eager.parameters()):
            assert got.grad is not None, name
            torch.testing.assert_close(got.grad, want.grad, rtol=1e-4, atol=1e-5, msg=name)
        for jitted in graphs or [compiled]:  # each graph's backward is one of this compiler's traces
            assert compiler.last_backward_traces(jitted)
