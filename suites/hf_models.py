"""Hugging Face GPT-2 and Llama (`transformers`), from small random configurations (nothing is
downloaded): forward (logits) and forward + backward (loss and every parameter's gradient), in
float32 on CPU and bf16 on GPU, through every variant (`compiler.jit` of the model and the dynamo
backend among them), each checked against the float64 reference before it is timed.

Skipped, with the reason, where transformers is not installed. Dropout is off: the harness does
not seed each call, so draws could not be compared with the reference's (seeded dropout is
compared with eager in tests/compiler/runtime/test_module_training.py). Bytes: the
parameters read once (twice and their gradients written for forward + backward), the logits written.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from fusebench.cases.case import Case, Params, dtype_named, generator
from fusebench.cases.variants import call_model
from fusebench.integrations.asv_adapter import asv_benchmarks
from suites._models.training import forward_backward

VOCABULARY = 512


def _config(name: str) -> Any:
    import transformers

    if name == "gpt2":
        return transformers.GPT2Config(
            n_layer=4, n_head=4, n_embd=256, n_positions=1024, vocab_size=VOCABULARY,
            bos_token_id=0, eos_token_id=0, attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0,
        )  # fmt: skip
    return transformers.LlamaConfig(
        num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2, hidden_size=256, intermediate_size=688,
        vocab_size=VOCABULARY, max_position_embeddings=1024, bos_token_id=0, eos_token_id=0,
    )  # fmt: skip


def _model(params: Params, device: torch.device, seed: int, train: bool) -> torch.nn.Module:
    import transformers

    torch.manual_seed(seed)
    kind = transformers.GPT2LMHeadModel if params["model"] == "gpt2" else transformers.LlamaForCausalLM
    model = kind(_config(params["model"])).to(device=device, dtype=dtype_named(params["dtype"]))
    return model.train(train).requires_grad_(train)


def _batch(params: Params, device: torch.device, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    batch, length = params["tokens"]
    tokens = torch.randint(0, VOCABULARY, (batch, length), generator=generator(seed)).to(device)
    return tokens, torch.ones_like(tokens)


class Keywords(torch.nn.Module):
    """The model called with keywords: `(tokens, mask) -> output`; with `labels`, the tokens are
    their own labels and the output has a loss."""

    def __init__(self, model: torch.nn.Module, labels: bool) -> None:
        super().__init__()
        self.model = model
        self.labels = labels

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> Any:
        return self.model(input_ids=tokens, attention_mask=mask, labels=tokens if self.labels else None)


def _forward_inputs(params: Params, device: torch.device, seed: int) -> tuple:
    return (Keywords(_model(params, device, seed, train=False), labels=False), *_batch(params, device, seed))


def _forward_backward_inputs(params: Params, device: torch.device, seed: int) -> tuple:
    model = _model(params, device, seed, train=True)
    return (Keywords(model, labels=True), *_batch(params, device, seed), list(model.parameters()))


def _logits(fn: Any, args: tuple) -> torch.Tensor:
    return fn(*args).logits


def _reference(model: torch.nn.Module, *inputs: Any) -> Any:
    return copy.deepcopy(model).to(torch.float64)(*inputs)


def _parameter_count(params: Params) -> int:
    import transformers

    kind = transformers.GPT2LMHeadModel if params["model"] == "gpt2" else transformers.LlamaForCausalLM
    with torch.device("meta"):
        return sum(p.numel() for p in kind(_config(params["model"])).parameters())


def _forward_bytes(params: Params) -> int:
    batch, length = params["tokens"]
    return (_parameter_count(params) + batch * length * VOCABULARY) * dtype_named(params["dtype"]).itemsize


def _forward_backward_bytes(params: Params) -> int:
    return _forward_bytes(params) + 2 * _parameter_count(params) * dtype_named(params["dtype"]).itemsize


def _tokens(params: Params) -> int:
    batch, length = params["tokens"]
    return batch * length


_GRID = {"model": ["gpt2", "llama"], "tokens": [(8, 1024)], "dtype": ["bfloat16"]}
_QUICK = {"model": ["gpt2", "llama"], "tokens": [(2, 64)], "dtype": ["float32"]}
_TOLERANCES = {torch.bfloat16: (5e-2, 5e-2), torch.float32: (1e-3, 1e-4)}

CASES = [
    Case(
        name="hf_forward",
        mode="inference",
        fn=call_model,
        make_inputs=_forward_inputs,
        bytes_moved=_forward_bytes,
        params=_GRID,
        quick_params=_QUICK,
        reference=_reference,
        call=_logits,
        tolerances=_TOLERANCES,
        tokens=_tokens,
        requires=("transformers",),
        description="transformers GPT-2 / Llama (small random configurations): logits",
    ),
    Case(
        name="hf_forward_backward",
        mode="training",
        fn=call_model,
        make_inputs=_forward_backward_inputs,
        bytes_moved=_forward_backward_bytes,
        params=_GRID,
        quick_params=_QUICK,
        call=forward_backward,
        tolerances=_TOLERANCES,
        tokens=_tokens,
        requires=("transformers",),
        description="transformers GPT-2 / Llama: loss and every parameter's gradient (dropout on, not in attention)",
    ),
]

globals().update(asv_benchmarks(__name__, CASES))
