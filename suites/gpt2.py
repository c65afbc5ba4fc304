"""GPT-2 small (124M parameters, nanoGPT-like, suites/_models/gpt.py) inference in bf16.

- prefill: logits of a batch of prompts (causal attention over the whole sequence).
- decode: one new token per sequence against full per-layer KV caches (written in place at the
  last position, then attended over with a boolean mask).
- train: one training step: forward with cross entropy, backward, AdamW (suites/_models/training.py).

Each variant compiles the model (`call_model`); the reference is the model in float64. Bytes: the
parameters read once, the logits written, and for decode the caches read and the new rows
written.
"""

from __future__ import annotations

import copy

import torch

from fusebench.cases.case import Case, Params, dtype_named, generator
from fusebench.cases.variants import call_model
from fusebench.integrations.asv_adapter import asv_benchmarks
from suites._models.gpt import GPT, Decoder, GPTConfig
from suites._models.tokens import new_tokens, prompt_tokens
from suites._models.training import train_inputs, train_step

CONFIGS = {"gpt2-small": GPTConfig.small, "gpt2-tiny": GPTConfig.tiny}


def _model(params: Params, device: torch.device, seed: int) -> GPT:
    torch.manual_seed(seed)
    model = GPT(CONFIGS[params["model"]]()).to(device=device, dtype=dtype_named(params["dtype"])).eval()
    return model.requires_grad_(False)


def _prefill_inputs(params: Params, device: torch.device, seed: int) -> tuple:
    model = _model(params, device, seed)
    batch, length = params["tokens"]
    tokens = torch.randint(0, model.config.vocab_size, (batch, length), generator=generator(seed)).to(device)
    return model, tokens


def _decode_inputs(params: Params, device: torch.device, seed: int) -> tuple:
    model = _model(params, device, seed)
    batch, length = params["tokens"]
    gen = generator(seed)
    caches = model.empty_caches(batch, length, model.wte.weight.dtype, device)
    for k, v in caches:
        k.copy_(torch.randn(k.shape, generator=gen).to(k.dtype))
        v.copy_(torch.randn(v.shape, generator=gen).to(v.dtype))
    tokens = torch.randint(0, model.config.vocab_size, (batch, 1), generator=gen).to(device)
    return Decoder(model), tokens, torch.tensor([length - 1], device=device), caches


def _train_inputs(params: Params, device: torch.device, seed: int) -> tuple:
    torch.manual_seed(seed)
    model = GPT(CONFIGS[params["model"]]()).to(device=device, dtype=dtype_named(params["dtype"])).train()
    batch, length = params["tokens"]
    gen = generator(seed)
    tokens = torch.randint(0, model.config.vocab_size, (batch, length + 1), generator=gen).to(device)
    return train_inputs(model, tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous())


def _reference(model: torch.nn.Module, *inputs: object) -> object:
    return copy.deepcopy(model).to(torch.float64)(*inputs)


def _parameter_bytes(params: Params) -> int:
    c = CONFIGS[params["model"]]()
    count = c.vocab_size * c.n_embd + c.block_size * c.n_embd + c.n_layer * (12 * c.n_embd**2 + 13 * c.n_embd)
    count += 2 * c.n_embd  # the final LayerNorm
    return count * dtype_named(params["dtype"]).itemsize


def _prefill_bytes(params: Params) -> int:
    batch, length = params["tokens"]
    c = CONFIGS[params["model"]]()
    return _parameter_bytes(params) + batch * length * c.vocab_size * dtype_named(params["dtype"]).itemsize


def _decode_bytes(params: Params) -> int:
    batch, length = params["tokens"]
    c = CONFIGS[params["model"]]()
    element = dtype_named(params["dtype"]).itemsize
    caches = 2 * c.n_layer * batch * length * c.n_embd * element
    return _parameter_bytes(params) + caches + batch * c.vocab_size * element


def _train_bytes(params: Params) -> int:
    # parameters read forward and backward, gradients written, AdamW reading and writing 4 tensors
    return 8 * _parameter_bytes(params) + _prefill_bytes(params)


_TOLERANCES = {torch.bfloat16: (5e-2, 5e-2)}

CASES = [
    Case(
        name="gpt2_prefill",
        fn=call_model,
        make_inputs=_prefill_inputs,
        bytes_moved=_prefill_bytes,
        params={"model": ["gpt2-small"], "tokens": [(8, 1024)], "dtype": ["bfloat16"]},
        quick_params={"model": ["gpt2-tiny"], "tokens": [(2, 32)], "dtype": ["bfloat16"]},
        reference=_reference,
        tolerances=_TOLERANCES,
        tokens=prompt_tokens,
        description="GPT-2 small forward over a batch of prompts (logits)",
    ),
    Case(
        name="gpt2_decode",
        fn=call_model,
        make_inputs=_decode_inputs,
        bytes_moved=_decode_bytes,
        params={"model": ["gpt2-small"], "tokens": [(8, 1024)], "dtype": ["bfloat16"]},
        quick_params={"model": ["gpt2-tiny"], "tokens": [(2, 32)], "dtype": ["bfloat16"]},
        reference=_reference,
        tolerances=_TOLERANCES,
        mutated_args=(3,),
        headline_variants=("torch.compile(reduce-overhead)", "fusebench-cudagraphs"),
        tokens=new_tokens,
        description="GPT-2 small: one token per sequence against full KV caches (index_copy_ + masked SDPA)",
    ),
    Case(
        name="gpt2_train",
        fn=call_model,
        make_inputs=_train_inputs,
        bytes_moved=_train_bytes,
        params={"model": ["gpt2-small"], "tokens": [(8, 1024)], "dtype": ["bfloat16"]},
        quick_params={"model": ["gpt2-tiny"], "tokens": [(2, 32)], "dtype": ["bfloat16"]},
        call=train_step,
        tolerances=_TOLERANCES,
        mutated_args=(4,),
        tokens=prompt_tokens,
        description="GPT-2 small training step: forward + cross entropy, backward, AdamW (bf16)",
    ),
]

globals().update(asv_benchmarks(__name__, CASES))
