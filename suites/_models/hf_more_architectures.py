"""More Hugging Face architectures as users bring them, beyond those the issue names (the table of
suites/_models/hf_architectures.py, whose `Architecture`, kinds and config helpers these use): decoders
(dense, mixtures of experts, sliding windows, hybrids of attention with state-space or linear
attention), encoders, encoder-decoders and vision models, tiny (`QUICK`). Each runs through both entry
points of the compiler against eager in tests/compiler/models/test_hf_zoo.py; the probe that found
them is transformers' own model list, tried with these configs.
"""

from __future__ import annotations

from typing import Any

from suites._models.hf_architectures import (
    _IDS,
    CAUSAL,
    MASKED,
    SEQ2SEQ,
    VISION,
    Architecture,
    Dims,
    _bart_like,
    _bert_like,
    _gpt2_like,
    _head_dim_like,
    _llama_like,
    _t5_like,
    _vit_like,
)


def _gated_delta(d: Dims, **extra: Any) -> dict[str, Any]:
    """Linear attention by the gated delta rule (torch.linalg.solve_triangular over chunks) in every
    other layer, full attention in the others."""
    return _head_dim_like(
        d, layer_types=["linear_attention", "full_attention"] * (d.layers // 2), linear_num_value_heads=d.heads,
        linear_num_key_heads=d.kv_heads, linear_key_head_dim=d.hidden // d.heads,
        linear_value_head_dim=d.hidden // d.heads, **extra,
    )  # fmt: skip


def _experts(d: Dims) -> dict[str, Any]:
    return {"num_experts": d.experts, "num_experts_per_tok": 2, "moe_intermediate_size": d.ffn // 2,
            "shared_expert_intermediate_size": d.ffn // 2}  # fmt: skip


MORE_ZOO: tuple[Architecture, ...] = (
    Architecture("falcon_h1", "FalconH1Config", "FalconH1ForCausalLM", CAUSAL, _llama_like),
    Architecture("olmoe", "OlmoeConfig", "OlmoeForCausalLM", CAUSAL,
                 lambda d: _llama_like(d, num_experts=d.experts, num_experts_per_tok=2), routes_tokens=True),
    Architecture("granitemoe", "GraniteMoeConfig", "GraniteMoeForCausalLM", CAUSAL,
                 lambda d: _llama_like(d, num_local_experts=d.experts, num_experts_per_tok=2), routes_tokens=True),
    Architecture("granitemoeshared", "GraniteMoeSharedConfig", "GraniteMoeSharedForCausalLM", CAUSAL,
                 lambda d: _llama_like(d, num_local_experts=d.experts, num_experts_per_tok=2), routes_tokens=True),
    Architecture("hunyuan_v1_dense", "HunYuanDenseV1Config", "HunYuanDenseV1ForCausalLM", CAUSAL, _head_dim_like),
    Architecture("hunyuan_v1_moe", "HunYuanMoEV1Config", "HunYuanMoEV1ForCausalLM", CAUSAL,
                 lambda d: _head_dim_like(d, num_experts=d.experts, num_experts_per_tok=2), routes_tokens=True),
    Architecture("exaone4", "Exaone4Config", "Exaone4ForCausalLM", CAUSAL,
                 lambda d: _llama_like(d, sliding_window=d.window)),
    Architecture("helium", "HeliumConfig", "HeliumForCausalLM", CAUSAL, _head_dim_like),
    Architecture("nemotron", "NemotronConfig", "NemotronForCausalLM", CAUSAL, _head_dim_like),
    Architecture("arcee", "ArceeConfig", "ArceeForCausalLM", CAUSAL, _head_dim_like),
    Architecture("persimmon", "PersimmonConfig", "PersimmonForCausalLM", CAUSAL, lambda d: {**_bert_like(d), **_IDS}),
    Architecture("biogpt", "BioGptConfig", "BioGptForCausalLM", CAUSAL, lambda d: {**_bert_like(d), **_IDS}),
    Architecture("xglm", "XGLMConfig", "XGLMForCausalLM", CAUSAL, lambda d: {
        "num_layers": d.layers, "d_model": d.hidden, "attention_heads": d.heads, "ffn_dim": d.ffn,
        "vocab_size": d.vocabulary, "max_position_embeddings": d.positions, **_IDS}),
    Architecture("ctrl", "CTRLConfig", "CTRLLMHeadModel", CAUSAL, lambda d: _gpt2_like(d, dff=d.ffn)),  # np.sqrt
    Architecture("openai_gpt", "OpenAIGPTConfig", "OpenAIGPTLMHeadModel", CAUSAL, _gpt2_like),
    Architecture("olmo3", "Olmo3Config", "Olmo3ForCausalLM", CAUSAL, lambda d: _llama_like(d, sliding_window=d.window)),
    Architecture("ernie4_5", "Ernie4_5Config", "Ernie4_5ForCausalLM", CAUSAL, _head_dim_like),
    Architecture("ernie4_5_moe", "Ernie4_5_MoeConfig", "Ernie4_5_MoeForCausalLM", CAUSAL, lambda d: _llama_like(
        d, moe_num_experts=d.experts, num_experts_per_tok=2, moe_intermediate_size=d.ffn // 2), routes_tokens=True),
    Architecture("glm", "GlmConfig", "GlmForCausalLM", CAUSAL, _head_dim_like),
    Architecture("glm4_moe", "Glm4MoeConfig", "Glm4MoeForCausalLM", CAUSAL, lambda d: _llama_like(
        d, n_routed_experts=d.experts, num_experts_per_tok=2, moe_intermediate_size=d.ffn // 2), routes_tokens=True),
    Architecture("seed_oss", "SeedOssConfig", "SeedOssForCausalLM", CAUSAL, _head_dim_like),
    Architecture("ministral", "MinistralConfig", "MinistralForCausalLM", CAUSAL,
                 lambda d: _head_dim_like(d, sliding_window=d.window)),
    Architecture("phimoe", "PhimoeConfig", "PhimoeForCausalLM", CAUSAL,
                 lambda d: _llama_like(d, num_local_experts=d.experts, num_experts_per_tok=2), routes_tokens=True),
    Architecture("diffllama", "DiffLlamaConfig", "DiffLlamaForCausalLM", CAUSAL, _head_dim_like),
    Architecture("bitnet", "BitNetConfig", "BitNetForCausalLM", CAUSAL, _llama_like),
    Architecture("rwkv", "RwkvConfig", "RwkvForCausalLM", CAUSAL, lambda d: {
        "num_hidden_layers": d.layers, "hidden_size": d.hidden, "intermediate_size": d.ffn,
        "vocab_size": d.vocabulary, "context_length": d.positions, **_IDS}),
    Architecture("lfm2", "Lfm2Config", "Lfm2ForCausalLM", CAUSAL, _llama_like),  # short convolutions
    Architecture("vaultgemma", "VaultGemmaConfig", "VaultGemmaForCausalLM", CAUSAL,
                 lambda d: _head_dim_like(d, sliding_window=d.window)),
    Architecture("doge", "DogeConfig", "DogeForCausalLM", CAUSAL, _llama_like),
    Architecture("xlnet", "XLNetConfig", "XLNetLMHeadModel", CAUSAL, lambda d: {
        "n_layer": d.layers, "d_model": d.hidden, "n_head": d.heads, "d_inner": d.ffn, "vocab_size": d.vocabulary,
        **_IDS}),
    Architecture("gpt_neox_japanese", "GPTNeoXJapaneseConfig", "GPTNeoXJapaneseForCausalLM", CAUSAL, lambda d: {
        "num_hidden_layers": d.layers, "hidden_size": d.hidden, "num_attention_heads": d.heads,
        "vocab_size": d.vocabulary, "max_position_embeddings": d.positions, **_IDS}),
    Architecture("granite_swa", "GraniteSWAConfig", "GraniteSWAForCausalLM", CAUSAL,
                 lambda d: _llama_like(d, sliding_window=d.window)),
    Architecture("cohere2_moe", "Cohere2MoeConfig", "Cohere2MoeForCausalLM", CAUSAL, lambda d: _head_dim_like(
        d, num_experts=d.experts, num_experts_per_tok=2, sliding_window=d.window), routes_tokens=True),
    Architecture("bert_generation", "BertGenerationConfig", "BertGenerationDecoder", CAUSAL,
                 lambda d: {**_bert_like(d), **_IDS, "is_decoder": True}),
    Architecture("recurrent_gemma", "RecurrentGemmaConfig", "RecurrentGemmaForCausalLM", CAUSAL,
                 lambda d: _head_dim_like(d, num_key_value_heads=1, block_types=["recurrent", "attention"],
                                          lru_width=d.hidden, attention_window_size=d.window)),
    # linear attention by the gated delta rule (torch.linalg.solve_triangular over chunks)
    Architecture("qwen3_next", "Qwen3NextConfig", "Qwen3NextForCausalLM", CAUSAL,
                 lambda d: _gated_delta(d, **_experts(d)), routes_tokens=True),
    Architecture("qwen3_5_text", "Qwen3_5TextConfig", "Qwen3_5ForCausalLM", CAUSAL, _gated_delta),
    Architecture("qwen3_5_moe_text", "Qwen3_5MoeTextConfig", "Qwen3_5MoeForCausalLM", CAUSAL,
                 lambda d: _gated_delta(d, **_experts(d)), routes_tokens=True),
    Architecture("olmo_hybrid", "OlmoHybridConfig", "OlmoHybridForCausalLM", CAUSAL, _llama_like),
    Architecture("granitemoehybrid", "GraniteMoeHybridConfig", "GraniteMoeHybridForCausalLM", CAUSAL,
                 lambda d: _llama_like(
                     d, num_local_experts=d.experts, num_experts_per_tok=2, layer_types=["mamba", "attention"],
                     mamba_n_heads=d.heads, mamba_d_head=2 * d.hidden // d.heads, mamba_d_state=8, mamba_n_groups=1,
                     mamba_expand=2, mamba_chunk_size=d.window), routes_tokens=True),
    # encoders
    Architecture("ernie", "ErnieConfig", "ErnieForMaskedLM", MASKED, _bert_like),
    Architecture("nystromformer", "NystromformerConfig", "NystromformerForMaskedLM", MASKED, _bert_like),
    Architecture("layoutlm", "LayoutLMConfig", "LayoutLMForMaskedLM", MASKED, _bert_like),
    Architecture("mobilebert", "MobileBertConfig", "MobileBertForMaskedLM", MASKED,
                 lambda d: _bert_like(d, embedding_size=d.hidden // 2)),
    Architecture("rembert", "RemBertConfig", "RemBertForMaskedLM", MASKED,
                 lambda d: _bert_like(d, input_embedding_size=d.hidden // 2, output_embedding_size=d.hidden)),
    Architecture("roformer", "RoFormerConfig", "RoFormerForMaskedLM", MASKED,
                 lambda d: _bert_like(d, embedding_size=d.hidden)),
    Architecture("megatron_bert", "MegatronBertConfig", "MegatronBertForMaskedLM", MASKED, _bert_like),
    Architecture("roberta_prelayernorm", "RobertaPreLayerNormConfig", "RobertaPreLayerNormForMaskedLM", MASKED,
                 lambda d: _bert_like(d, max_position_embeddings=d.positions + 2, pad_token_id=1)),
    Architecture("xlm_roberta_xl", "XLMRobertaXLConfig", "XLMRobertaXLForMaskedLM", MASKED,
                 lambda d: _bert_like(d, max_position_embeddings=d.positions + 2, pad_token_id=1)),
    Architecture("camembert", "CamembertConfig", "CamembertForMaskedLM", MASKED,
                 lambda d: _bert_like(d, max_position_embeddings=d.positions + 2, pad_token_id=1)),
    Architecture("data2vec_text", "Data2VecTextConfig", "Data2VecTextForMaskedLM", MASKED,
                 lambda d: _bert_like(d, max_position_embeddings=d.positions + 2, pad_token_id=1)),
    Architecture("esm", "EsmConfig", "EsmForMaskedLM", MASKED, lambda d: _bert_like(d, mask_token_id=3)),
    Architecture("eurobert", "EuroBertConfig", "EuroBertForMaskedLM", MASKED, lambda d: {
        **_head_dim_like(d), "mask_token_id": 3}),
    Architecture("nomic_bert", "NomicBertConfig", "NomicBertForMaskedLM", MASKED,
                 lambda d: _bert_like(d, head_dim=d.hidden // d.heads)),
    # NOTE: its attention is a custom autograd.Function whose backward approximates the gradient; jit
    # differentiates the Function's forward instead, so its gradients are the exact ones, not eager's
    Architecture("big_bird", "BigBirdConfig", "BigBirdForMaskedLM", MASKED, _bert_like),  # as BigBird-Pegasus
    Architecture("mra", "MraConfig", "MraForMaskedLM", MASKED, _bert_like),  # requires_grad_ in forward
    Architecture("yoso", "YosoConfig", "YosoForMaskedLM", MASKED, _bert_like, known_failures={
        "jit-training": "jit differentiates a custom autograd.Function's forward, not its own backward"}),
    Architecture("convbert", "ConvBertConfig", "ConvBertForMaskedLM", MASKED,
                 lambda d: _bert_like(d, embedding_size=d.hidden // 2)),  # F.unfold
    # encoder-decoders
    Architecture("blenderbot", "BlenderbotConfig", "BlenderbotForConditionalGeneration", SEQ2SEQ, _bart_like),
    Architecture("blenderbot_small", "BlenderbotSmallConfig", "BlenderbotSmallForConditionalGeneration", SEQ2SEQ,
                 _bart_like),
    # NOTE: block-sparse attention, on a sequence shorter than its blocks, rebuilds its layers as full
    # attention inside forward (new modules, their weights then swapped for its own)
    Architecture("bigbird_pegasus", "BigBirdPegasusConfig", "BigBirdPegasusForConditionalGeneration", SEQ2SEQ,
                 _bart_like),
    Architecture("plbart", "PLBartConfig", "PLBartForConditionalGeneration", SEQ2SEQ, _bart_like),
    Architecture("mvp", "MvpConfig", "MvpForConditionalGeneration", SEQ2SEQ, _bart_like),
    Architecture("nllb_moe", "NllbMoeConfig", "NllbMoeForConditionalGeneration", SEQ2SEQ,
                 lambda d: _bart_like(d, num_experts=d.experts), routes_tokens=True),
    # NOTE: its router converts itself to its own dtype every call (Module.to: a no-op while traced), then
    # loops over the experts `nonzero()` finds: jit refuses that with one line, dynamo breaks the graph there
    Architecture("switch_transformers", "SwitchTransformersConfig", "SwitchTransformersForConditionalGeneration",
                 SEQ2SEQ, lambda d: {**_t5_like(d), "num_experts": d.experts, "expert_capacity": 16,
                                     "num_sparse_encoder_layers": 1, "num_sparse_decoder_layers": 1},
                 routes_tokens=True, attention_mask=True,
                 known_failures={"jit": "the experts' loop runs over nonzero(): refused with one line"}),
    Architecture("umt5", "UMT5Config", "UMT5ForConditionalGeneration", SEQ2SEQ, _t5_like),
    Architecture("pegasus_x", "PegasusXConfig", "PegasusXForConditionalGeneration", SEQ2SEQ,
                 _bart_like),  # np.log of its positions' scale
    # vision
    Architecture("bit", "BitConfig", "BitForImageClassification", VISION, lambda d: {
        "num_channels": 3, "embedding_size": 16, "hidden_sizes": [16, 32], "depths": [1, 1], "num_groups": 8,
        "num_labels": 10}),  # weight-standardized convolutions, group norm
    Architecture("mobilenet_v1", "MobileNetV1Config", "MobileNetV1ForImageClassification", VISION, lambda d: {
        "num_channels": 3, "image_size": d.image, "depth_multiplier": 0.25, "num_labels": 10}),  # depthwise
    Architecture("ijepa", "IJepaConfig", "IJepaForImageClassification", VISION, lambda d: _vit_like(d, num_labels=10)),
    Architecture("vit_msn", "ViTMSNConfig", "ViTMSNForImageClassification", VISION,
                 lambda d: _vit_like(d, num_labels=10)),
    Architecture("dinov2_with_registers", "Dinov2WithRegistersConfig", "Dinov2WithRegistersForImageClassification",
                 VISION, lambda d: _vit_like(d, num_labels=10)),
    # newer decoders
    Architecture("gemma4_text", "Gemma4TextConfig", "Gemma4ForCausalLM", CAUSAL, lambda d: _head_dim_like(
        d, sliding_window=d.window, num_experts=d.experts, moe_intermediate_size=d.ffn // 2), routes_tokens=True),
    Architecture("minimax", "MiniMaxConfig", "MiniMaxForCausalLM", CAUSAL, lambda d: _head_dim_like(
        d, num_local_experts=d.experts, num_experts_per_tok=2), routes_tokens=True),  # lightning attention
    Architecture("exaone_moe", "ExaoneMoeConfig", "ExaoneMoeForCausalLM", CAUSAL, lambda d: _llama_like(
        d, num_experts=d.experts, num_experts_per_tok=2, moe_intermediate_size=d.ffn // 2, sliding_window=d.window),
        routes_tokens=True),
    Architecture("flex_olmo", "FlexOlmoConfig", "FlexOlmoForCausalLM", CAUSAL,
                 lambda d: _llama_like(d, num_experts=d.experts, num_experts_per_tok=2), routes_tokens=True),
    Architecture("afmoe", "AfmoeConfig", "AfmoeForCausalLM", CAUSAL, lambda d: _head_dim_like(
        d, num_experts=d.experts, num_experts_per_tok=2, moe_intermediate_size=d.ffn // 2, sliding_window=d.window),
        routes_tokens=True),
    Architecture("solar_open", "SolarOpenConfig", "SolarOpenForCausalLM", CAUSAL, lambda d: _head_dim_like(
        d, n_routed_experts=d.experts, num_experts_per_tok=2, moe_intermediate_size=d.ffn // 2), routes_tokens=True),
    Architecture("mellum", "MellumConfig", "MellumForCausalLM", CAUSAL, lambda d: _head_dim_like(
        d, num_experts=d.experts, num_experts_per_tok=2, moe_intermediate_size=d.ffn // 2, sliding_window=d.window),
        routes_tokens=True),
    Architecture("jais2", "Jais2Config", "Jais2ForCausalLM", CAUSAL, _head_dim_like),
    Architecture("ministral3", "Ministral3Config", "Ministral3ForCausalLM", CAUSAL, _head_dim_like),
    Architecture("nanochat", "NanoChatConfig", "NanoChatForCausalLM", CAUSAL, _llama_like),
    Architecture("cwm", "CwmConfig", "CwmForCausalLM", CAUSAL, lambda d: _head_dim_like(d, sliding_window=d.window)),
    Architecture("apertus1p5_text", "Apertus1p5TextConfig", "Apertus1p5TextForCausalLM", CAUSAL, _llama_like),
    # an encoder that mixes tokens by a Fourier transform (torch.fft.fftn) instead of attention
    Architecture("fnet", "FNetConfig", "FNetForMaskedLM", MASKED, _bert_like),
    # a state-space decoder whose cache keeps the last positions of its convolution and the scan's
    # final state, each copied into a tensor of its own
    Architecture("falcon_mamba", "FalconMambaConfig", "FalconMambaForCausalLM", CAUSAL, _head_dim_like),
    Architecture("beam", "BeamConfig", "BeamForCausalLM", CAUSAL, _head_dim_like),
    Architecture("aria_text", "AriaTextConfig", "AriaTextForCausalLM", CAUSAL,
                 lambda d: _head_dim_like(d, moe_num_experts=d.experts, moe_topk=2), routes_tokens=True),
)  # fmt: skip
