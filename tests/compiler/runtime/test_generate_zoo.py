"""Greedy `model.generate(ids, max_new_tokens=8, do_sample=False)` with the default cache, as a user
calls it on a zoo architecture (suites/_models/hf_architectures.py, tiny), through
`compiler.jit(model.forward)` and `torch.compile(model.forward, backend="fusebench")`, gives eager's
tokens: an encoder-decoder (its EncoderDecoderCache, and the encoder's output `generate()` passes
back in as `encoder_outputs`), models with sliding-window layers, mixtures of experts, a recurrent
hybrid keeping its state in module attributes (RecurrentGemma), linear attention (Qwen3-Next)."""

from __future__ import annotations

import functools
import os
import warnings

import pytest
import torch

import compiler
from suites._models.hf_architectures import QUICK, ZOO_BY_NAME
from suites._models.hf_more_architectures import MORE_ZOO

pytest.importorskip("transformers")

NEW_TOKENS = 8


def _model(architecture: str) -> torch.nn.Module:
    torch.manual_seed(0)
    zoo = ZOO_BY_NAME.get(architecture) or next(a for a in MORE_ZOO if a.name == architecture)
    return zoo.build(QUICK).eval()


def _generate(model: torch.nn.Module) -> torch.Tensor:
    tokens = torch.randint(3, QUICK.vocabulary, (2, 7), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        return model.generate(
            tokens, attention_mask=torch.ones_like(tokens), max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
            do_sample=False,
        )  # fmt: skip


@functools.cache
def _eager_tokens(architecture: str) -> torch.Tensor:
    return _generate(_model(architecture))


# NOTE: T5 through jit is the default case (encoder_outputs, a ModelOutput argument); the rest are
# slow. Each architecture runs through one entry, the two in turn, unless FUSEBENCH_ZOO_ALL=1 asks
# for both (as the zoo's tests do): the default test run's time is bounded.
ARCHITECTURES = ("t5", "bart", "gemma2", "gemma3_text", "mixtral", "qwen2_moe", "recurrent_gemma", "qwen3_next")
CASES = [
    pytest.param(architecture, entry, id=f"{architecture}-{entry}",
                 marks=[] if (architecture, entry) == ("t5", "jit") else [pytest.mark.slow])
    for index, architecture in enumerate(ARCHITECTURES)
    for entry in ("jit", "dynamo")
    if os.environ.get("FUSEBENCH_ZOO_ALL", "0") == "1" or entry == ("jit", "dynamo")[index % 2]
]  # fmt: skip


@pytest.mark.parametrize(("architecture", "entry"), CASES)
def test_greedy_generate_gives_eager_tokens(architecture: str, entry: str) -> None:
    expected = _eager_tokens(architecture)
    model = _model(architecture)
    if entry == "jit":
        model.forward = jitted = compiler.jit(model.forward)
    else:
        torch._dynamo.reset()
        model.forward = torch.compile(model.forward, backend="fusebench")
    before = compiler.examine.fallbacks_recorded()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", compiler.UnsupportedFallback)
        tokens = _generate(model)
    assert tokens.shape == expected.shape and torch.equal(tokens, expected), (tokens, expected)
    assert compiler.examine.fallbacks(since=before) == []
    if entry == "jit":
        # the prefill, the first decode step, the decode step with its length symbolic: not one per token
        assert compiler.cache_stats(jitted).misses <= 3
