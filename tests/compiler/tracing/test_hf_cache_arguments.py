"""Hugging Face caches passed to a jitted forward: a prefill and decode steps with a DynamicCache and
a StaticCache (a tiny random Llama, CPU) give eager's logits and leave eager's cache contents in the
caller's cache, for several seeds; StaticCache's decode steps share one compilation."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

import compiler

transformers = pytest.importorskip("transformers")

VOCABULARY = 64


def _model(seed: int) -> Any:
    config = transformers.LlamaConfig(
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, hidden_size=32, intermediate_size=64,
        vocab_size=VOCABULARY, max_position_embeddings=64, bos_token_id=0, eos_token_id=0, pad_token_id=0,
    )  # fmt: skip
    torch.manual_seed(seed)
    return transformers.LlamaForCausalLM(config).eval()


def _cache(kind: str, config: Any) -> Any:
    if kind == "static":
        return transformers.StaticCache(config=config, max_cache_len=16)
    return transformers.DynamicCache(config=config)


def _assert_same_cache(got: Any, want: Any) -> None:
    assert type(got) is type(want) and len(got.layers) == len(want.layers)
    for layer, expected in zip(got.layers, want.layers):
        assert type(layer) is type(expected) and vars(layer).keys() == vars(expected).keys()
        for name, value in vars(expected).items():
            if isinstance(value, torch.Tensor):
                torch.testing.assert_close(getattr(layer, name), value, atol=1e-5, rtol=1e-5)
            else:
                assert getattr(layer, name) == value, name


# NOTE: a few seconds each on CPU: one seed runs by default, the others are slow
SEEDS = [0, pytest.param(1, marks=pytest.mark.slow), pytest.param(2, marks=pytest.mark.slow)]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("kind", ["dynamic", "static"])
def test_prefill_and_decode_steps_with_a_cache_match_eager(kind: str, seed: int) -> None:
    eager = _model(seed)
    model = copy.deepcopy(eager)
    jitted = compiler.jit(model.forward)
    cache, expected_cache = _cache(kind, eager.config), _cache(kind, eager.config)
    ids = torch.randint(1, VOCABULARY, (2, 5), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        for _ in range(4):
            got, want = jitted(input_ids=ids, cache=cache), eager(input_ids=ids, cache=expected_cache)
            assert got.cache is cache  # the model returns the cache it was given: the caller's own
            torch.testing.assert_close(got.logits, want.logits, atol=1e-5, rtol=1e-5)
            _assert_same_cache(cache, expected_cache)
            ids = want.logits[:, -1:].argmax(-1)
    misses = compiler.cache_stats(jitted).misses
    # static: the prefill and one decode step for all; dynamic: the prefill, then a first and a second
    # cache length, whose sizes are then symbolic
    assert misses == (2 if kind == "static" else 3)


def test_a_static_cache_is_updated_in_its_own_memory() -> None:
    model = _model(0)
    jitted = compiler.jit(model.forward)
    cache = _cache("static", model.config)
    ids = torch.randint(1, VOCABULARY, (2, 5), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        jitted(input_ids=ids, cache=cache)
        buffers = [(layer.keys, layer.keys.data_ptr(), layer.cumulative_length) for layer in cache.layers]
        jitted(input_ids=ids[:, :1], cache=cache)
    assert [(layer.keys, layer.keys.data_ptr(), layer.cumulative_length) for layer in cache.layers] == buffers
    assert [int(layer.cumulative_length) for layer in cache.layers] == [6, 6]


def test_an_uninitialised_cache_after_an_initialised_one_recompiles() -> None:
    eager = _model(1)
    jitted = compiler.jit(copy.deepcopy(eager).forward)
    ids = torch.randint(1, VOCABULARY, (2, 5), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        used = _cache("dynamic", eager.config)
        jitted(input_ids=ids, cache=used)
        jitted(input_ids=ids[:, :1], cache=used)
        fresh, expected_cache = _cache("dynamic", eager.config), _cache("dynamic", eager.config)
        got, want = jitted(input_ids=ids, cache=fresh), eager(input_ids=ids, cache=expected_cache)
    torch.testing.assert_close(got.logits, want.logits, atol=1e-5, rtol=1e-5)
    _assert_same_cache(fresh, expected_cache)
    assert compiler.cache_stats(jitted).hits == 1  # the fresh cache reuses the prefill's entry


@pytest.mark.slow
def test_an_encoder_decoder_cache_through_decode_steps_matches_eager() -> None:
    config = transformers.BartConfig(
        encoder_layers=2, decoder_layers=2, d_model=32, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=VOCABULARY, max_position_embeddings=64, dropout=0.0,
        attention_dropout=0.0, activation_dropout=0.0, decoder_start_token_id=0, pad_token_id=2,
    )  # fmt: skip
    torch.manual_seed(0)
    eager = transformers.BartForConditionalGeneration(config).eval()
    jitted = compiler.jit(copy.deepcopy(eager).forward)

    def cache() -> Any:
        return transformers.EncoderDecoderCache(
            transformers.DynamicCache(config=config), transformers.DynamicCache(config=config)
        )

    got_cache, want_cache = cache(), cache()
    generator = torch.Generator().manual_seed(5)
    source, tokens = torch.randint(3, VOCABULARY, (2, 6), generator=generator), torch.randint(3, VOCABULARY, (2, 3))
    with torch.no_grad():
        encoded = (eager.get_encoder()(input_ids=source).last_hidden_state,)
        for _ in range(4):
            got = jitted(encoder_outputs=encoded, decoder_input_ids=tokens, cache=got_cache)
            want = eager(encoder_outputs=encoded, decoder_input_ids=tokens, cache=want_cache)
            assert got.cache is got_cache
            torch.testing.assert_close(got.logits, want.logits, atol=1e-5, rtol=1e-5)
            _assert_same_cache(got_cache.self_attention_cache, want_cache.self_attention_cache)
            _assert_same_cache(got_cache.cross_attention_cache, want_cache.cross_attention_cache)
            assert got_cache.is_updated == want_cache.is_updated == {0: True, 1: True}
            tokens = want.logits[:, -1:].argmax(-1)
