"""Hugging Face transformers models (small random configurations, nothing downloaded) through
compiler.jit and the dynamo backend: the output types, logits, losses and gradients as eager."""

from __future__ import annotations

import copy

import pytest
import torch

import compiler

transformers = pytest.importorskip("transformers")


def _models() -> list:
    gpt2 = transformers.GPT2Config(
        n_layer=2, n_head=2, n_embd=32, vocab_size=96, n_positions=64, use_cache=False, bos_token_id=0,
        eos_token_id=0, attn_pdrop=0.0, resid_pdrop=0.1, embd_pdrop=0.1,
    )  # fmt: skip
    llama = transformers.LlamaConfig(
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, hidden_size=32, intermediate_size=64,
        vocab_size=96, max_position_embeddings=64, use_cache=False, bos_token_id=0, eos_token_id=0,
    )  # fmt: skip
    return [(transformers.GPT2LMHeadModel, gpt2), (transformers.LlamaForCausalLM, llama)]


@pytest.mark.parametrize("through", ["jit", "dynamo"])
@pytest.mark.parametrize("index", [0, 1], ids=["gpt2", "llama"])
def test_forward_and_backward_match_eager(through: str, index: int) -> None:
    torch._dynamo.reset()
    kind, config = _models()[index]
    torch.manual_seed(0)
    eager = kind(config).train()
    model = copy.deepcopy(eager)
    compiled = compiler.jit(model) if through == "jit" else torch.compile(model, backend="fusebench")
    tokens = torch.randint(0, 96, (2, 16))
    mask = torch.ones_like(tokens)
    torch.manual_seed(1)  # the same dropout draws (GPT-2's residual and embedding dropout are on)
    output = compiled(tokens, attention_mask=mask, labels=tokens)
    torch.manual_seed(1)
    expected = eager(tokens, attention_mask=mask, labels=tokens)
    assert type(output) is type(expected)
    torch.testing.assert_close(output.logits, expected.logits)
    torch.testing.assert_close(output.loss, expected.loss)
    output.loss.backward()
    expected.loss.backward()
    for (name, got), want in zip(model.named_parameters(), eager.parameters()):
        torch.testing.assert_close(got.grad, want.grad, rtol=1e-4, atol=1e-5, msg=name)
