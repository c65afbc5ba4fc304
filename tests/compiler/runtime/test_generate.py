"""`model.generate()` (greedy, 32 new tokens) through this compiler gives eager's tokens, with the
default DynamicCache and with StaticCache, for tiny random GPT-2 and Llama configurations on CPU,
and the compilations are counted: with StaticCache one compilation serves every decode step; with
a DynamicCache, whose length grows every step, automatic dynamic sizes keep them few."""

from __future__ import annotations

import functools
import warnings
from typing import Any

import pytest
import torch

import compiler
from compiler.runtime import dynamo

transformers = pytest.importorskip("transformers")

NEW_TOKENS = 32
VOCABULARY = 64


def _model(architecture: str) -> Any:
    torch.manual_seed(0)
    special = {"bos_token_id": 0, "eos_token_id": 0, "pad_token_id": 0}
    if architecture == "gpt2":
        config = transformers.GPT2Config(
            n_layer=2, n_head=2, n_embd=32, n_positions=128, vocab_size=VOCABULARY, **special
        )
        return transformers.GPT2LMHeadModel(config).eval()
    config = transformers.LlamaConfig(
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, hidden_size=32, intermediate_size=64,
        vocab_size=VOCABULARY, max_position_embeddings=128, **special,
    )  # fmt: skip
    return transformers.LlamaForCausalLM(config).eval()


def _generate(model: Any, cache: str) -> torch.Tensor:
    tokens = torch.randint(1, VOCABULARY, (2, 7), generator=torch.Generator().manual_seed(1))
    options: dict[str, Any] = {"cache_implementation": "static"} if cache == "static" else {}
    with torch.no_grad():
        return model.generate(
            tokens, attention_mask=torch.ones_like(tokens), max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
            do_sample=False, **options,
        )  # fmt: skip


@functools.cache
def _eager_tokens(architecture: str, cache: str) -> torch.Tensor:
    return _generate(_model(architecture), cache)


CASES = [("gpt2", "dynamic"), ("gpt2", "static"), ("llama", "dynamic"), ("llama", "static")]


@pytest.mark.slow
@pytest.mark.parametrize(("architecture", "cache"), CASES)
def test_generate_through_the_dynamo_backend_gives_eager_tokens(architecture: str, cache: str) -> None:
    from torch._dynamo.utils import counters

    expected = _eager_tokens(architecture, cache)
    model = _model(architecture)
    torch._dynamo.reset()
    frames, first_graph = counters["frames"]["ok"], dynamo.graphs_compiled()
    first_fallback = compiler.examine.fallbacks_recorded()
    model.forward = torch.compile(model.forward, backend="fusebench")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", compiler.UnsupportedFallback)
        tokens = _generate(model, cache)
    assert tokens.shape == (2, 7 + NEW_TOKENS)
    assert torch.equal(tokens, expected)
    graphs = [g for g in dynamo.compiled_graphs(first_graph) if g.last_entry is not None]
    compilations = [compiler.cache_stats(g).misses for g in graphs]
    fallbacks = compiler.examine.fallbacks(since=first_fallback)
    if cache == "static":
        # the prefill and one decode step, each compiled once: every later step reuses the decode's
        assert counters["frames"]["ok"] - frames == 2 and compilations == [1, 1]
        assert fallbacks == []
    else:
        # the prefill; the first decode step; the decode step with a dynamic length, whose sizes our
        # compiler makes symbolic at its second call: not one compilation per new token
        assert counters["frames"]["ok"] - frames == 3
        assert max(compilations) == 2 and sum(compilations) <= 6, compilations
        assert all(f.kind == "op" for f in fallbacks), str(fallbacks)  # ops split out, no graph breaks


@pytest.mark.slow
@pytest.mark.parametrize(("architecture", "cache"), CASES)
def test_generate_through_compiler_jit_gives_eager_tokens(architecture: str, cache: str) -> None:
    expected = _eager_tokens(architecture, cache)
    model = _model(architecture)
    model.forward = jitted = compiler.jit(model.forward)
    tokens = _generate(model, cache)
    assert torch.equal(tokens, expected)
    if cache == "static":
        assert compiler.cache_stats(jitted).misses == 2  # the prefill, and one decode step for all
    else:
        assert compiler.cache_stats(jitted).misses <= 4
