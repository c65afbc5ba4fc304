"""The Hugging Face architectures of the `hf_zoo` suite: how to build each from a random config.

Each `Architecture` names its transformers classes (resolved only when a model is built, so this
module imports without transformers), what kind of model it is (it decides the inputs and which
cases apply), and its config's keywords for a size: `Dims` at GPU size give ~50-150M parameters,
`QUICK` a tiny model for CPU. Dropout is off (the harness compares each call with a reference,
and draws could not match), and token 0 is padding, start and end of sequence for every model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class Dims:
    """The sizes a config is written from; `positions` bounds every sequence length."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocabulary: int
    positions: int
    experts: int = 4
    image: int = 224
    patch: int = 16
    mel_bins: int = 80


GPU = Dims(layers=8, hidden=768, heads=12, kv_heads=4, ffn=3072, vocabulary=32000, positions=2048)
QUICK = Dims(
    layers=2, hidden=32, heads=4, kv_heads=2, ffn=64, vocabulary=128, positions=128, image=32, patch=8, mel_bins=16
)

CAUSAL = "causal"  # decoder-only language model: input_ids -> logits; labels -> loss; decodes
MASKED = "masked"  # encoder with a masked-LM head: input_ids -> logits
SEQ2SEQ = "seq2seq"  # encoder-decoder: input_ids + decoder_input_ids -> logits
SPEECH = "speech"  # Whisper: input_features + decoder_input_ids -> logits
VISION = "vision"  # ViT: pixel_values -> class logits


@dataclass(frozen=True)
class Architecture:
    """One architecture: transformers' config and model class names, its kind, its config keywords."""

    name: str
    config: str
    model: str
    kind: str
    keywords: Callable[[Dims], dict[str, Any]]

    def build_config(self, dims: Dims) -> Any:
        """The config at these sizes, dropout off."""
        import transformers

        config = getattr(transformers, self.config)(**self.keywords(dims))
        for key, value in config.to_dict().items():
            if isinstance(value, float) and ("dropout" in key or "pdrop" in key or key == "layerdrop"):
                setattr(config, key, 0.0)
        return config

    def build(self, dims: Dims) -> torch.nn.Module:
        """A model with random weights at these sizes (on the default device, in float32)."""
        import transformers

        return getattr(transformers, self.model)(self.build_config(dims))


_SPECIAL = {"bos_token_id": 0, "eos_token_id": 0, "pad_token_id": 0}


def _llama_like(d: Dims, **extra: Any) -> dict[str, Any]:
    return {
        "num_hidden_layers": d.layers, "hidden_size": d.hidden, "num_attention_heads": d.heads,
        "num_key_value_heads": d.kv_heads, "intermediate_size": d.ffn, "vocab_size": d.vocabulary,
        "max_position_embeddings": d.positions, **_SPECIAL, **extra,
    }  # fmt: skip


def _bert_like(d: Dims) -> dict[str, Any]:
    return {
        "num_hidden_layers": d.layers, "hidden_size": d.hidden, "num_attention_heads": d.heads,
        "intermediate_size": d.ffn, "vocab_size": d.vocabulary, "max_position_embeddings": d.positions,
        "pad_token_id": 0,
    }  # fmt: skip


def _bart_like(d: Dims) -> dict[str, Any]:
    half = max(d.layers // 2, 1)
    return {
        "encoder_layers": half, "decoder_layers": half, "d_model": d.hidden, "encoder_attention_heads": d.heads,
        "decoder_attention_heads": d.heads, "encoder_ffn_dim": d.ffn, "decoder_ffn_dim": d.ffn,
        "vocab_size": d.vocabulary, **_SPECIAL, "decoder_start_token_id": 0,
    }  # fmt: skip


ARCHITECTURES: tuple[Architecture, ...] = (
    Architecture("gpt2", "GPT2Config", "GPT2LMHeadModel", CAUSAL, lambda d: {
        "n_layer": d.layers, "n_embd": d.hidden, "n_head": d.heads, "n_inner": d.ffn, "vocab_size": d.vocabulary,
        "n_positions": d.positions, **_SPECIAL}),
    Architecture("gpt_neox", "GPTNeoXConfig", "GPTNeoXForCausalLM", CAUSAL, lambda d: {
        "num_hidden_layers": d.layers, "hidden_size": d.hidden, "num_attention_heads": d.heads,
        "intermediate_size": d.ffn, "vocab_size": d.vocabulary, "max_position_embeddings": d.positions, **_SPECIAL}),
    Architecture("gptj", "GPTJConfig", "GPTJForCausalLM", CAUSAL, lambda d: {
        "n_layer": d.layers, "n_embd": d.hidden, "n_head": d.heads, "n_inner": d.ffn, "vocab_size": d.vocabulary,
        "n_positions": d.positions, "rotary_dim": d.hidden // d.heads // 2, **_SPECIAL}),
    Architecture("opt", "OPTConfig", "OPTForCausalLM", CAUSAL, lambda d: {
        "num_hidden_layers": d.layers, "hidden_size": d.hidden, "num_attention_heads": d.heads, "ffn_dim": d.ffn,
        "word_embed_proj_dim": d.hidden, "vocab_size": d.vocabulary, "max_position_embeddings": d.positions,
        **_SPECIAL}),
    Architecture("bloom", "BloomConfig", "BloomForCausalLM", CAUSAL, lambda d: {
        "n_layer": d.layers, "hidden_size": d.hidden, "n_head": d.heads, "vocab_size": d.vocabulary, **_SPECIAL}),
    Architecture("falcon", "FalconConfig", "FalconForCausalLM", CAUSAL, lambda d: {
        "num_hidden_layers": d.layers, "hidden_size": d.hidden, "num_attention_heads": d.heads,
        "ffn_hidden_size": d.ffn, "vocab_size": d.vocabulary, "max_position_embeddings": d.positions, **_SPECIAL}),
    Architecture("llama", "LlamaConfig", "LlamaForCausalLM", CAUSAL, _llama_like),
    Architecture("mistral", "MistralConfig", "MistralForCausalLM", CAUSAL,
                 lambda d: _llama_like(d, sliding_window=max(d.positions // 16, 4))),
    Architecture("mixtral", "MixtralConfig", "MixtralForCausalLM", CAUSAL, lambda d: _llama_like(
        d, intermediate_size=d.ffn // 3, num_local_experts=d.experts, num_experts_per_tok=2,
        experts_implementation="eager")),  # NOTE: grouped_mm runs neither float64 (the reference) nor fp32 on CPU
    Architecture("qwen2", "Qwen2Config", "Qwen2ForCausalLM", CAUSAL, _llama_like),
    Architecture("qwen3", "Qwen3Config", "Qwen3ForCausalLM", CAUSAL,
                 lambda d: _llama_like(d, head_dim=d.hidden // d.heads)),
    Architecture("phi3", "Phi3Config", "Phi3ForCausalLM", CAUSAL, _llama_like),
    Architecture("gemma", "GemmaConfig", "GemmaForCausalLM", CAUSAL,
                 lambda d: _llama_like(d, head_dim=d.hidden // d.heads)),
    Architecture("gemma2", "Gemma2Config", "Gemma2ForCausalLM", CAUSAL, lambda d: _llama_like(
        d, head_dim=d.hidden // d.heads, sliding_window=max(d.positions // 16, 4))),
    Architecture("bert", "BertConfig", "BertForMaskedLM", MASKED, _bert_like),
    Architecture("roberta", "RobertaConfig", "RobertaForMaskedLM", MASKED,
                 lambda d: {**_bert_like(d), "max_position_embeddings": d.positions + 2, "pad_token_id": 1}),
    Architecture("deberta_v2", "DebertaV2Config", "DebertaV2ForMaskedLM", MASKED, lambda d: {
        **_bert_like(d), "relative_attention": True, "position_biased_input": False,
        "pos_att_type": ["p2c", "c2p"], "max_relative_positions": -1}),
    Architecture("t5", "T5Config", "T5ForConditionalGeneration", SEQ2SEQ, lambda d: {
        "num_layers": max(d.layers // 2, 1), "num_decoder_layers": max(d.layers // 2, 1), "d_model": d.hidden,
        "d_kv": d.hidden // d.heads, "d_ff": d.ffn, "num_heads": d.heads, "vocab_size": d.vocabulary,
        "pad_token_id": 0, "eos_token_id": 1, "decoder_start_token_id": 0}),
    Architecture("bart", "BartConfig", "BartForConditionalGeneration", SEQ2SEQ,
                 lambda d: {**_bart_like(d), "max_position_embeddings": d.positions}),
    Architecture("whisper", "WhisperConfig", "WhisperForConditionalGeneration", SPEECH, lambda d: {
        **_bart_like(d), "num_mel_bins": d.mel_bins, "max_source_positions": d.positions // 2,
        "max_target_positions": d.positions, "suppress_tokens": [], "begin_suppress_tokens": []}),
    Architecture("vit", "ViTConfig", "ViTForImageClassification", VISION, lambda d: {
        "num_hidden_layers": d.layers, "hidden_size": d.hidden, "num_attention_heads": d.heads,
        "intermediate_size": d.ffn, "image_size": d.image, "patch_size": d.patch, "num_labels": 10}),
)  # fmt: skip
BY_NAME = {a.name: a for a in ARCHITECTURES}
DECODERS = tuple(a.name for a in ARCHITECTURES if a.kind == CAUSAL)


def parameter_count(architecture: str, dims: Dims) -> int:
    """The model's parameters (a tied one counted once), built on the meta device."""
    with torch.device("meta"):
        return sum(p.numel() for p in BY_NAME[architecture].build(dims).parameters())
