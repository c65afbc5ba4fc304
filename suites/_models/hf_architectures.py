"""Hugging Face architectures with random configs, one table for every consumer: the `hf_zoo` suite
(its `ARCHITECTURES`, at GPU sizes ~50-150M parameters) and tests/compiler/models/test_hf_zoo.py
(every architecture of `ZOO`, tiny, through both entry points of the compiler).

Each `Architecture` names its transformers classes (resolved only when a model is built, so this
module imports without transformers), what kind of model it is (it decides the inputs and which
cases apply), its config's keywords for a size (`Dims`: `GPU` or the tiny `QUICK`) and what the
compiler cannot run yet. Dropout is off (the harness compares each call with a reference, and
draws could not match); tokens 0, 1 and 2 are start, end of sequence and padding.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
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
    window: int  # a sliding window's or local attention's length
    experts: int = 4
    image: int = 224
    patch: int = 16
    mel_bins: int = 80
    frames: int = 2048  # of a speech model's input features (twice its encoder's positions)


GPU = Dims(layers=8, hidden=768, heads=12, kv_heads=4, ffn=3072, vocabulary=32000, positions=2048, window=128)
QUICK = Dims(
    layers=2,
    hidden=32,
    heads=4,
    kv_heads=2,
    ffn=64,
    vocabulary=128,
    positions=64,
    window=4,
    image=32,
    patch=8,
    mel_bins=16,
    frames=32,
)

CAUSAL = "causal"  # decoder-only language model: input_ids -> logits; labels -> loss; decodes
MASKED = "masked"  # encoder with a masked-LM head: input_ids -> logits
SEQ2SEQ = "seq2seq"  # encoder-decoder: input_ids + decoder_input_ids -> logits
SPEECH = "speech"  # Whisper: input_features + decoder_input_ids -> logits
VISION = "vision"  # ViT: pixel_values -> class logits
TEXT_FEATURES = "text_features"  # a text encoder without a head (CLIP's): input_ids -> features
AUDIO = "audio"  # a speech encoder without a head (wav2vec2): input_values -> features


@dataclass(frozen=True)
class Architecture:
    """One architecture: transformers' config and model class names, its kind, its config keywords."""

    name: str
    config: str
    model: str
    kind: str
    keywords: Callable[[Dims], dict[str, Any]]
    # why the compiler cannot run it yet, per entry point ("jit", "dynamo", or "dynamo-forward"...)
    known_failures: dict[str, str] = field(default_factory=dict)
    # a mixture of experts: each token goes to its top-k experts, chosen from computed router logits
    routes_tokens: bool = False
    # called with the tokenizer's attention_mask, as its model card calls it: under compilation
    # (torch.compiler.is_compiling()) transformers builds no default mask for these (LongT5's local
    # attention, SwitchTransformers' encoder) and indexes None
    attention_mask: bool = False

    def build_config(self, dims: Dims) -> Any:
        """The config at these sizes, dropout off."""
        import transformers

        config = getattr(transformers, self.config)(**self.keywords(dims))
        for key, value in config.to_dict().items():
            if isinstance(value, float) and any(part in key for part in ("dropout", "pdrop", "layerdrop", "drop_path")):
                setattr(config, key, 0.0)
        return config

    def build(self, dims: Dims) -> torch.nn.Module:
        """A model with random weights at these sizes (on the default device, in float32)."""
        import transformers

        return getattr(transformers, self.model)(self.build_config(dims))


_IDS = {"bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 2}


def _llama_like(d: Dims, **extra: Any) -> dict[str, Any]:
    return {
        "num_hidden_layers": d.layers, "hidden_size": d.hidden, "num_attention_heads": d.heads,
        "num_key_value_heads": d.kv_heads, "intermediate_size": d.ffn, "vocab_size": d.vocabulary,
        "max_position_embeddings": d.positions, **_IDS, **extra,
    }  # fmt: skip


def _head_dim_like(d: Dims, **extra: Any) -> dict[str, Any]:
    """Llama's keywords with the head size given (these configs default it to a fixed size)."""
    return _llama_like(d, head_dim=d.hidden // d.heads, **extra)


def _bert_like(d: Dims, **extra: Any) -> dict[str, Any]:
    return {
        "num_hidden_layers": d.layers, "hidden_size": d.hidden, "num_attention_heads": d.heads,
        "intermediate_size": d.ffn, "vocab_size": d.vocabulary, "max_position_embeddings": d.positions,
        "pad_token_id": 2, **extra,
    }  # fmt: skip


def _vit_like(d: Dims, **extra: Any) -> dict[str, Any]:
    return {
        "num_hidden_layers": d.layers, "hidden_size": d.hidden, "num_attention_heads": d.heads,
        "intermediate_size": d.ffn, "image_size": d.image, "patch_size": d.patch, **extra,
    }  # fmt: skip


def _half(d: Dims) -> int:
    """Encoder (and decoder) layers of an encoder-decoder: half the depth, at least 2."""
    return max(d.layers // 2, 2)


def _bart_like(d: Dims, **extra: Any) -> dict[str, Any]:
    return {
        "encoder_layers": _half(d), "decoder_layers": _half(d), "d_model": d.hidden,
        "encoder_attention_heads": d.heads, "decoder_attention_heads": d.heads, "encoder_ffn_dim": d.ffn,
        "decoder_ffn_dim": d.ffn, "vocab_size": d.vocabulary, "max_position_embeddings": d.positions,
        "decoder_start_token_id": 0, "forced_eos_token_id": None, **_IDS, **extra,
    }  # fmt: skip


def _t5_like(d: Dims) -> dict[str, Any]:
    return {
        "num_layers": _half(d), "num_decoder_layers": _half(d), "num_heads": d.heads, "d_model": d.hidden,
        "d_kv": d.hidden // d.heads, "d_ff": d.ffn, "vocab_size": d.vocabulary, "relative_attention_num_buckets": 8,
        "decoder_start_token_id": 0, **_IDS,
    }  # fmt: skip


def _gpt2_like(d: Dims, **extra: Any) -> dict[str, Any]:
    return {
        "n_layer": d.layers, "n_head": d.heads, "n_embd": d.hidden, "vocab_size": d.vocabulary,
        "n_positions": d.positions, **_IDS, **extra,
    }  # fmt: skip


def _speech_encoder(d: Dims) -> dict[str, Any]:
    return {
        "num_hidden_layers": d.layers, "num_attention_heads": d.heads, "hidden_size": d.hidden,
        "intermediate_size": d.ffn, "conv_dim": [16, 16], "conv_stride": [5, 4], "conv_kernel": [10, 8],
        "num_conv_pos_embeddings": 8, "num_conv_pos_embedding_groups": 4, "mask_time_prob": 0.0,
        "vocab_size": d.vocabulary,
    }  # fmt: skip


ZOO: tuple[Architecture, ...] = (
    # decoders
    Architecture("gpt2", "GPT2Config", "GPT2LMHeadModel", CAUSAL, lambda d: _gpt2_like(d, n_inner=d.ffn)),
    Architecture("gpt_neox", "GPTNeoXConfig", "GPTNeoXForCausalLM", CAUSAL, lambda d: {
        "num_hidden_layers": d.layers, "hidden_size": d.hidden, "num_attention_heads": d.heads,
        "intermediate_size": d.ffn, "vocab_size": d.vocabulary, "max_position_embeddings": d.positions,
        "rotary_pct": 0.5, **_IDS}),
    Architecture("gptj", "GPTJConfig", "GPTJForCausalLM", CAUSAL,
                 lambda d: _gpt2_like(d, n_inner=d.ffn, rotary_dim=d.hidden // d.heads // 2)),
    Architecture("opt", "OPTConfig", "OPTForCausalLM", CAUSAL, lambda d: {
        "num_hidden_layers": d.layers, "hidden_size": d.hidden, "num_attention_heads": d.heads, "ffn_dim": d.ffn,
        "word_embed_proj_dim": d.hidden, "vocab_size": d.vocabulary, "max_position_embeddings": d.positions,
        **_IDS}),
    Architecture("bloom", "BloomConfig", "BloomForCausalLM", CAUSAL, lambda d: {
        "n_layer": d.layers, "hidden_size": d.hidden, "n_head": d.heads, "vocab_size": d.vocabulary, **_IDS}),
    Architecture("falcon", "FalconConfig", "FalconForCausalLM", CAUSAL, lambda d: {
        "num_hidden_layers": d.layers, "hidden_size": d.hidden, "num_attention_heads": d.heads,
        "ffn_hidden_size": d.ffn, "vocab_size": d.vocabulary, "max_position_embeddings": d.positions, **_IDS}),
    Architecture("llama", "LlamaConfig", "LlamaForCausalLM", CAUSAL, _llama_like),
    Architecture("mistral", "MistralConfig", "MistralForCausalLM", CAUSAL,
                 lambda d: _llama_like(d, sliding_window=d.window)),
    # NOTE: the experts as transformers runs them by default (grouped GEMMs); the float64 reference
    # runs transformers' own loop over the experts (suites/hf_zoo.py); a multiple of 8 keeps
    # torch's CPU grouped GEMM's 16-byte strides in float32
    Architecture("mixtral", "MixtralConfig", "MixtralForCausalLM", CAUSAL, lambda d: _llama_like(
        d, intermediate_size=d.ffn // 3 // 8 * 8, num_local_experts=d.experts, num_experts_per_tok=2,
        sliding_window=None), routes_tokens=True),
    Architecture("qwen2", "Qwen2Config", "Qwen2ForCausalLM", CAUSAL, _llama_like),
    Architecture("qwen3", "Qwen3Config", "Qwen3ForCausalLM", CAUSAL,
                 lambda d: _llama_like(d, head_dim=d.hidden // d.heads)),
    Architecture("phi3", "Phi3Config", "Phi3ForCausalLM", CAUSAL, _llama_like),
    Architecture("gemma", "GemmaConfig", "GemmaForCausalLM", CAUSAL,
                 lambda d: _llama_like(d, head_dim=d.hidden // d.heads)),
    Architecture("gemma2", "Gemma2Config", "Gemma2ForCausalLM", CAUSAL,
                 lambda d: _llama_like(d, head_dim=d.hidden // d.heads, sliding_window=d.window)),
    Architecture("gemma3_text", "Gemma3TextConfig", "Gemma3ForCausalLM", CAUSAL,
                 lambda d: _llama_like(d, head_dim=d.hidden // d.heads, sliding_window=d.window)),
    Architecture("phi", "PhiConfig", "PhiForCausalLM", CAUSAL, _llama_like),
    Architecture("stablelm", "StableLmConfig", "StableLmForCausalLM", CAUSAL, _llama_like),
    Architecture("olmo", "OlmoConfig", "OlmoForCausalLM", CAUSAL, _llama_like),
    Architecture("gpt_neo", "GPTNeoConfig", "GPTNeoForCausalLM", CAUSAL, lambda d: {
        "num_layers": d.layers, "num_heads": d.heads, "hidden_size": d.hidden, "vocab_size": d.vocabulary,
        "max_position_embeddings": d.positions, "attention_types": [[["global", "local"], d.layers // 2]],
        "window_size": d.window, **_IDS}),
    Architecture("qwen3_moe", "Qwen3MoeConfig", "Qwen3MoeForCausalLM", CAUSAL, lambda d: _llama_like(
        d, head_dim=d.hidden // d.heads, num_experts=d.experts, num_experts_per_tok=2,
        moe_intermediate_size=d.ffn // 2, decoder_sparse_step=1), routes_tokens=True),
    Architecture("starcoder2", "Starcoder2Config", "Starcoder2ForCausalLM", CAUSAL, _llama_like),
    Architecture("granite", "GraniteConfig", "GraniteForCausalLM", CAUSAL, _llama_like),
    Architecture("cohere", "CohereConfig", "CohereForCausalLM", CAUSAL, _llama_like),
    Architecture("codegen", "CodeGenConfig", "CodeGenForCausalLM", CAUSAL,
                 lambda d: _gpt2_like(d, rotary_dim=d.hidden // d.heads // 2, n_ctx=d.positions)),
    Architecture("mpt", "MptConfig", "MptForCausalLM", CAUSAL, lambda d: {
        "n_layers": d.layers, "n_heads": d.heads, "d_model": d.hidden, "expansion_ratio": d.ffn // d.hidden,
        "vocab_size": d.vocabulary, "max_seq_len": d.positions, **_IDS}),
    Architecture("mamba", "MambaConfig", "MambaForCausalLM", CAUSAL, lambda d: {
        "num_hidden_layers": d.layers, "hidden_size": d.hidden, "state_size": 8, "expand": 2, "conv_kernel": 4,
        "vocab_size": d.vocabulary, **_IDS}),
    Architecture("olmo2", "Olmo2Config", "Olmo2ForCausalLM", CAUSAL, _llama_like),
    Architecture("smollm3", "SmolLM3Config", "SmolLM3ForCausalLM", CAUSAL, _llama_like),
    Architecture("glm4", "Glm4Config", "Glm4ForCausalLM", CAUSAL,
                 lambda d: _llama_like(d, head_dim=d.hidden // d.heads)),
    Architecture("cohere2", "Cohere2Config", "Cohere2ForCausalLM", CAUSAL,
                 lambda d: _llama_like(d, sliding_window=d.window)),
    Architecture("gpt_bigcode", "GPTBigCodeConfig", "GPTBigCodeForCausalLM", CAUSAL,
                 lambda d: _gpt2_like(d, n_inner=d.ffn)),
    Architecture("gpt_oss", "GptOssConfig", "GptOssForCausalLM", CAUSAL, lambda d: _llama_like(
        d, head_dim=d.hidden // d.heads, num_local_experts=d.experts, num_experts_per_tok=2,
        intermediate_size=d.ffn // 2, sliding_window=d.window), routes_tokens=True),
    Architecture("qwen2_moe", "Qwen2MoeConfig", "Qwen2MoeForCausalLM", CAUSAL, lambda d: _llama_like(
        d, num_experts=d.experts, num_experts_per_tok=2, moe_intermediate_size=d.ffn // 2,
        shared_expert_intermediate_size=d.ffn, decoder_sparse_step=1), routes_tokens=True),
    # NOTE: multi-head latent attention: keys and values from a low-rank projection, a rotary part of
    # each head apart (its size is the config's head_dim); every head its own key and value
    Architecture("deepseek_v3", "DeepseekV3Config", "DeepseekV3ForCausalLM", CAUSAL, lambda d: _llama_like(
        d, num_key_value_heads=d.heads, head_dim=d.hidden // d.heads // 2, qk_rope_head_dim=d.hidden // d.heads // 2,
        qk_nope_head_dim=d.hidden // d.heads, v_head_dim=d.hidden // d.heads, kv_lora_rank=d.hidden // 2,
        q_lora_rank=d.hidden * 3 // 4, n_routed_experts=d.experts, num_experts_per_tok=2, n_group=2, topk_group=1,
        moe_intermediate_size=d.ffn // 2, n_shared_experts=1, first_k_dense_replace=1), routes_tokens=True),
    # NOTE: rotary embeddings as complex numbers (torch.polar, view_as_complex, view_as_real)
    Architecture("deepseek_v2", "DeepseekV2Config", "DeepseekV2ForCausalLM", CAUSAL, lambda d: _llama_like(
        d, num_key_value_heads=d.heads, qk_rope_head_dim=d.hidden // d.heads // 2, qk_nope_head_dim=d.hidden // d.heads,
        v_head_dim=d.hidden // d.heads, kv_lora_rank=d.hidden // 2, q_lora_rank=d.hidden * 3 // 4,
        n_routed_experts=d.experts, num_experts_per_tok=2, moe_intermediate_size=d.ffn // 2, n_shared_experts=1,
        first_k_dense_replace=1), routes_tokens=True),
    Architecture("llama4_text", "Llama4TextConfig", "Llama4ForCausalLM", CAUSAL, lambda d: _llama_like(
        d, head_dim=d.hidden // d.heads, intermediate_size_mlp=d.ffn, num_local_experts=d.experts,
        interleave_moe_layer_step=2, attention_chunk_size=d.window, no_rope_layer_interval=2), routes_tokens=True),
    # hybrids of attention and state-space layers (their selective scans as transformers' torch code)
    Architecture("jamba", "JambaConfig", "JambaForCausalLM", CAUSAL, lambda d: _llama_like(
        d, num_experts=d.experts, num_experts_per_tok=2, mamba_d_state=8, mamba_d_conv=4, mamba_expand=2,
        attn_layer_period=2, attn_layer_offset=1, expert_layer_period=2, expert_layer_offset=1),
        routes_tokens=True),
    Architecture("bamba", "BambaConfig", "BambaForCausalLM", CAUSAL, lambda d: _llama_like(
        d, mamba_n_heads=d.heads, mamba_d_head=2 * d.hidden // d.heads, mamba_n_groups=1, mamba_d_state=8,
        mamba_d_conv=4, mamba_expand=2, mamba_chunk_size=d.window, attn_layer_indices=[1])),
    Architecture("apertus", "ApertusConfig", "ApertusForCausalLM", CAUSAL, _llama_like),  # XIELU: expm1
    Architecture("gemma3n_text", "Gemma3nTextConfig", "Gemma3nForCausalLM", CAUSAL, lambda d: _llama_like(
        d, head_dim=d.hidden // d.heads, sliding_window=d.window, num_kv_shared_layers=0, laurel_rank=4,
        hidden_size_per_layer_input=8, vocab_size_per_layer_input=d.vocabulary, altup_num_inputs=2,
        activation_sparsity_pattern=[0.0] * d.layers,
        layer_types=["sliding_attention", "full_attention"] * (d.layers // 2))),  # weight.data.clamp_ in training
    Architecture("mamba2", "Mamba2Config", "Mamba2ForCausalLM", CAUSAL, lambda d: {
        "num_hidden_layers": d.layers, "hidden_size": d.hidden, "num_heads": d.heads,
        "head_dim": 2 * d.hidden // d.heads, "state_size": 8, "expand": 2, "n_groups": 1, "chunk_size": d.window,
        "vocab_size": d.vocabulary, **_IDS}),
    # encoders
    Architecture("bert", "BertConfig", "BertForMaskedLM", MASKED, _bert_like),
    Architecture("roberta", "RobertaConfig", "RobertaForMaskedLM", MASKED,
                 lambda d: _bert_like(d, max_position_embeddings=d.positions + 2, pad_token_id=1)),
    Architecture("deberta_v2", "DebertaV2Config", "DebertaV2ForMaskedLM", MASKED, lambda d: _bert_like(
        d, relative_attention=True, position_buckets=8, pos_att_type=["p2c", "c2p"])),
    # its attention span is a torch.tensor of sizes, used as a slice bound
    Architecture("deberta", "DebertaConfig", "DebertaForMaskedLM", MASKED, lambda d: _bert_like(
        d, relative_attention=True, pos_att_type=["p2c", "c2p"])),
    Architecture("distilbert", "DistilBertConfig", "DistilBertForMaskedLM", MASKED, lambda d: {
        "n_layers": d.layers, "n_heads": d.heads, "dim": d.hidden, "hidden_dim": d.ffn, "vocab_size": d.vocabulary,
        "max_position_embeddings": d.positions, "pad_token_id": 2}),
    Architecture("albert", "AlbertConfig", "AlbertForMaskedLM", MASKED,
                 lambda d: _bert_like(d, embedding_size=d.hidden // 2)),
    Architecture("electra", "ElectraConfig", "ElectraForMaskedLM", MASKED,
                 lambda d: _bert_like(d, embedding_size=d.hidden // 2)),
    Architecture("modernbert", "ModernBertConfig", "ModernBertForMaskedLM", MASKED, lambda d: {
        **_bert_like(d), "local_attention": d.window, **_IDS}),
    Architecture("clip_text", "CLIPTextConfig", "CLIPTextModel", TEXT_FEATURES,
                 lambda d: {**_bert_like(d), **_IDS}),
    Architecture("xlm_roberta", "XLMRobertaConfig", "XLMRobertaForMaskedLM", MASKED,
                 lambda d: _bert_like(d, max_position_embeddings=d.positions + 2, pad_token_id=1)),
    Architecture("mpnet", "MPNetConfig", "MPNetForMaskedLM", MASKED,
                 lambda d: _bert_like(d, max_position_embeddings=d.positions + 2, pad_token_id=1)),
    # pools its sequence between blocks (avg_pool2d with ceil_mode)
    Architecture("funnel", "FunnelConfig", "FunnelForMaskedLM", MASKED, lambda d: {
        "block_sizes": [1, 1], "num_decoder_layers": 1, "d_model": d.hidden, "n_head": d.heads,
        "d_head": d.hidden // d.heads, "d_inner": d.ffn, "vocab_size": d.vocabulary, "pad_token_id": 2}),
    # encoder-decoders
    Architecture("t5", "T5Config", "T5ForConditionalGeneration", SEQ2SEQ, _t5_like),
    Architecture("bart", "BartConfig", "BartForConditionalGeneration", SEQ2SEQ, _bart_like),
    Architecture("mbart", "MBartConfig", "MBartForConditionalGeneration", SEQ2SEQ, _bart_like),
    Architecture("pegasus", "PegasusConfig", "PegasusForConditionalGeneration", SEQ2SEQ, _bart_like),
    Architecture("marian", "MarianConfig", "MarianMTModel", SEQ2SEQ, _bart_like),
    Architecture("mt5", "MT5Config", "MT5ForConditionalGeneration", SEQ2SEQ, _t5_like),
    Architecture("m2m_100", "M2M100Config", "M2M100ForConditionalGeneration", SEQ2SEQ, _bart_like),
    Architecture("longt5", "LongT5Config", "LongT5ForConditionalGeneration", SEQ2SEQ,
                 lambda d: {**_t5_like(d), "local_radius": d.window}, attention_mask=True),
    # NOTE: Longformer attention decides its global attention with `.item()` on the input: jit refuses
    # it with one line; the dynamo backend runs it with that graph break (and what it cannot trace) eagerly
    Architecture("led", "LEDConfig", "LEDForConditionalGeneration", SEQ2SEQ, lambda d: {
        **{k: v for k, v in _bart_like(d).items() if k != "max_position_embeddings"},
        "max_encoder_position_embeddings": d.positions, "max_decoder_position_embeddings": d.positions,
        "attention_window": [d.window * 2] * _half(d)},
        known_failures={"jit": "tensor.item() decides the control flow (global attention): refused with one line"}),
    Architecture("whisper", "WhisperConfig", "WhisperForConditionalGeneration", SPEECH, lambda d: {
        **{k: v for k, v in _bart_like(d).items() if k not in ("max_position_embeddings", "forced_eos_token_id")},
        "num_mel_bins": d.mel_bins, "max_source_positions": d.frames // 2, "max_target_positions": d.positions,
        "suppress_tokens": [], "begin_suppress_tokens": []}),
    # vision and audio
    Architecture("vit", "ViTConfig", "ViTForImageClassification", VISION, lambda d: _vit_like(d, num_labels=10)),
    Architecture("deit", "DeiTConfig", "DeiTForImageClassification", VISION, lambda d: _vit_like(d, num_labels=10)),
    Architecture("dinov2", "Dinov2Config", "Dinov2Model", VISION, _vit_like),
    Architecture("segformer", "SegformerConfig", "SegformerForImageClassification", VISION, lambda d: {
        "num_channels": 3, "num_encoder_blocks": 2, "depths": [1, 1], "sr_ratios": [2, 1], "hidden_sizes": [8, 16],
        "patch_sizes": [7, 3], "strides": [4, 2], "num_attention_heads": [1, 2], "mlp_ratios": [2, 2],
        "num_labels": 10}),
    Architecture("convnext", "ConvNextConfig", "ConvNextForImageClassification", VISION, lambda d: {
        "num_channels": 3, "hidden_sizes": [8, 16], "depths": [1, 1], "num_stages": 2, "patch_size": 4,
        "num_labels": 10}),
    Architecture("resnet", "ResNetConfig", "ResNetForImageClassification", VISION, lambda d: {
        "num_channels": 3, "embedding_size": 8, "hidden_sizes": [8, 16], "depths": [1, 1], "layer_type": "basic",
        "num_labels": 10}),
    Architecture("swin", "SwinConfig", "SwinForImageClassification", VISION, lambda d: {
        "image_size": d.image, "patch_size": 4, "embed_dim": 16, "depths": [1, 1], "num_heads": [2, 2],
        "window_size": 4, "num_labels": 10}),
    Architecture("clip_vision", "CLIPVisionConfig", "CLIPVisionModel", VISION, _vit_like),
    Architecture("beit", "BeitConfig", "BeitForImageClassification", VISION,
                 lambda d: _vit_like(d, num_labels=10, use_relative_position_bias=True)),
    Architecture("data2vec_vision", "Data2VecVisionConfig", "Data2VecVisionForImageClassification", VISION,
                 lambda d: _vit_like(d, num_labels=10, use_relative_position_bias=True)),
    Architecture("swinv2", "Swinv2Config", "Swinv2ForImageClassification", VISION, lambda d: {
        "image_size": d.image, "patch_size": 4, "embed_dim": 16, "depths": [1, 1], "num_heads": [2, 2],
        "window_size": 4, "num_labels": 10}),
    Architecture("convnextv2", "ConvNextV2Config", "ConvNextV2ForImageClassification", VISION, lambda d: {
        "num_channels": 3, "hidden_sizes": [8, 16], "depths": [1, 1], "num_stages": 2, "patch_size": 4,
        "num_labels": 10}),
    Architecture("regnet", "RegNetConfig", "RegNetForImageClassification", VISION, lambda d: {
        "num_channels": 3, "embedding_size": 8, "hidden_sizes": [8, 16], "depths": [1, 1], "groups_width": 4,
        "num_labels": 10}),
    # pooling head: nn.MultiheadAttention
    Architecture("siglip_vision", "SiglipVisionConfig", "SiglipVisionModel", VISION, _vit_like),
    Architecture("poolformer", "PoolFormerConfig", "PoolFormerForImageClassification", VISION, lambda d: {
        "hidden_sizes": [8, 16, 24, 32], "depths": [1, 1, 1, 1], "num_labels": 10}),  # avg_pool2d
    Architecture("vit_mae", "ViTMAEConfig", "ViTMAEModel", VISION, _vit_like),  # random masking: rand, argsort
    Architecture("wav2vec2", "Wav2Vec2Config", "Wav2Vec2Model", AUDIO, _speech_encoder),
    # squeezes its sequence with avg_pool1d
    Architecture("sew", "SEWConfig", "SEWModel", AUDIO, lambda d: {**_speech_encoder(d), "squeeze_factor": 2}),
    Architecture("wavlm", "WavLMConfig", "WavLMModel", AUDIO, _speech_encoder),  # F.multi_head_attention_forward
    Architecture("hubert", "HubertConfig", "HubertModel", AUDIO, _speech_encoder),
    Architecture("data2vec_audio", "Data2VecAudioConfig", "Data2VecAudioModel", AUDIO, lambda d: {
        **_speech_encoder(d), "num_conv_pos_embeddings": 4}),
    Architecture("wav2vec2_conformer", "Wav2Vec2ConformerConfig", "Wav2Vec2ConformerModel", AUDIO, lambda d: {
        **_speech_encoder(d), "conv_depthwise_kernel_size": 3}),
)  # fmt: skip
ZOO_BY_NAME = {a.name: a for a in ZOO}
# the hf_zoo suite's architectures, those the issue names: at GPU sizes ~50-150M parameters
SUITE = (
    "gpt2", "gpt_neox", "gptj", "opt", "bloom", "falcon", "llama", "mistral", "mixtral", "qwen2", "qwen3", "phi3",
    "gemma", "gemma2", "bert", "roberta", "deberta_v2", "t5", "bart", "whisper", "vit",
)  # fmt: skip
ARCHITECTURES: tuple[Architecture, ...] = tuple(ZOO_BY_NAME[name] for name in SUITE)
BY_NAME = {a.name: a for a in ARCHITECTURES}
DECODERS = tuple(a.name for a in ARCHITECTURES if a.kind == CAUSAL)


def parameter_count(architecture: str, dims: Dims) -> int:
    """The model's parameters (a tied one counted once), built on the meta device."""
    with torch.device("meta"):
        return sum(p.numel() for p in BY_NAME[architecture].build(dims).parameters())
