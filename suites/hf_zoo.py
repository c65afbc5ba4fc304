"""A zoo of Hugging Face architectures as users bring them (`transformers`, random configs,
nothing downloaded): decoders (GPT-2, GPT-NeoX, GPT-J, OPT, Bloom, Falcon, Llama, Mistral,
Mixtral, Qwen2, Qwen3, Phi-3, Gemma, Gemma-2), encoders (BERT, RoBERTa, DeBERTa-v2),
encoder-decoders (T5, BART, Whisper) and a vision transformer (ViT); suites/_models/hf_architectures.py
builds them at ~50-150M parameters in bf16 for the GPU grid and tiny in float32 for `--quick`.

- zoo_inference: the logits of a batch, the model called as its model card calls it (keywords,
  the default cache of a decoder included).
- zoo_training: the loss (the inputs are their own labels) and every parameter's gradient.
- zoo_decode (decoders): one new token per sequence after a prompt, its key/value cache given as
  tensors and made a `DynamicCache` inside the call (so every call sees the same cache).

Every standard variant runs every case (eager, torch.compile, fusebench = `compiler.jit` of the
model, fusebench-dynamo, thunder, ...); each is checked against the model in float64 before it
is timed. A mixture of experts (Mixtral) may disagree on a few whole token rows of its logits
(`routed_rows_may_differ`): where a token's router logits nearly tie, a run in bf16 sends it to
other experts than the float64 reference does, and whether eager or a compiler does so at a given
token is chance. What PyTorch's inductor dashboard reports per compiler (pass rate, geomean
speedup over eager, compile time, peak memory against eager) is read from these outcomes by the
report. Compiling a whole model takes each compiler seconds, so a default run measures a few
architectures (a decoder, a mixture of experts and an encoder for inference, a decoder's training
and decode steps); `--suite hf_zoo --all` measures the whole zoo, `-k` picks from all of it.

Skipped, with the reason, where transformers is not installed (nothing here imports it before a
case runs). Bytes: the parameters read once (for training, twice, and their gradients written),
the logits written, and for decode the cache read.
"""

from __future__ import annotations

import contextlib
import copy
import functools
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from fusebench.cases.case import Case, Params, dtype_named, generator
from fusebench.cases.variants import call_model
from fusebench.integrations.asv_adapter import asv_benchmarks
from suites._models.hf_architectures import (
    ARCHITECTURES,
    BY_NAME,
    DECODERS,
    GPU,
    QUICK,
    SEQ2SEQ,
    SPEECH,
    VISION,
    Dims,
    parameter_count,
)
from suites._models.training import forward_backward, forward_loss

ALL = [a.name for a in ARCHITECTURES]


@functools.cache
def cache_name() -> str:
    """What the installed transformers calls a model's key/value cache, as an argument and in its
    outputs: `cache` in newer releases (which warn on the old name), `past_key_values` before."""
    import dataclasses

    from transformers.modeling_outputs import CausalLMOutputWithPast

    fields = {field.name for field in dataclasses.fields(CausalLMOutputWithPast)}
    return "cache" if "cache" in fields else "past_key_values"


def _dims(params: Params) -> Dims:
    return QUICK if params["size"] == "quick" else GPU


class Called(nn.Module):
    """The model called with keywords, positional tensors named by `names`; returns the logits, or
    with `labels` among the names the whole output (its loss)."""

    def __init__(self, model: nn.Module, names: tuple[str, ...]) -> None:
        super().__init__()
        self.model = model
        self.names = names

    def forward(self, *tensors: torch.Tensor) -> Any:
        output = self.model(**dict(zip(self.names, tensors)))
        return output if "labels" in self.names else output.logits


class DecodeStep(nn.Module):
    """One decode step: `(token, *cache)` where the cache is each layer's keys then values."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, token: torch.Tensor, *cache: torch.Tensor) -> torch.Tensor:
        import transformers

        past = transformers.DynamicCache(list(zip(cache[0::2], cache[1::2])), config=self.model.config)
        return self.model(input_ids=token, **{cache_name(): past}).logits


def _model(params: Params, device: torch.device, seed: int, train: bool) -> nn.Module:
    torch.manual_seed(seed)
    model = BY_NAME[params["model"]].build(_dims(params))
    model = model.to(device=device, dtype=dtype_named(params["dtype"]))
    return model.train(train).requires_grad_(train)


def _batch(params: Params, device: torch.device, seed: int, labels: bool) -> tuple[tuple[str, ...], tuple]:
    """(keyword names, tensors) of the call the architecture's model card makes."""
    dims, kind = _dims(params), BY_NAME[params["model"]].kind
    batch, length = params["tokens"]
    gen = generator(seed)
    ids = torch.randint(1, dims.vocabulary, (batch, length), generator=gen).to(device)
    dtype = dtype_named(params["dtype"])
    if kind == VISION:
        pixels = torch.randn(batch, 3, dims.image, dims.image, generator=gen).to(device=device, dtype=dtype)
        classes = torch.randint(0, 10, (batch,), generator=gen).to(device)
        return (("pixel_values", "labels"), (pixels, classes)) if labels else (("pixel_values",), (pixels,))
    if kind == SPEECH:
        features = torch.randn(batch, dims.mel_bins, dims.frames, generator=gen).to(device=device, dtype=dtype)
        second = "labels" if labels else "decoder_input_ids"
        return ("input_features", second), (features, ids)
    if kind == SEQ2SEQ:
        return ("input_ids", "labels" if labels else "decoder_input_ids"), (ids, ids)
    return (("input_ids", "labels"), (ids, ids)) if labels else (("input_ids",), (ids,))


def _inference_inputs(params: Params, device: torch.device, seed: int) -> tuple:
    names, tensors = _batch(params, device, seed, labels=False)
    return (Called(_model(params, device, seed, train=False), names), *tensors)


def _training_inputs(params: Params, device: torch.device, seed: int) -> tuple:
    model = _model(params, device, seed, train=True)
    names, tensors = _batch(params, device, seed, labels=True)
    return (Called(model, names), *tensors, list(model.parameters()))


def _decode_inputs(params: Params, device: torch.device, seed: int) -> tuple:
    model = _model(params, device, seed, train=False)
    batch, length = params["tokens"]
    gen = generator(seed)
    prompt = torch.randint(1, _dims(params).vocabulary, (batch, length + 1), generator=gen).to(device)
    with torch.no_grad():
        past = getattr(model(input_ids=prompt[:, :-1]), cache_name())
    cache = [t.detach().clone() for layer in past.layers for t in (layer.keys, layer.values)]
    return (DecodeStep(model), prompt[:, -1:].contiguous(), *cache)


def _reference(model: nn.Module, *inputs: Any) -> Any:
    reference = copy.deepcopy(model).to(torch.float64)
    with _experts_looped(reference):
        return reference(*inputs)


@contextlib.contextmanager
def _experts_looped(model: nn.Module) -> Iterator[None]:
    """A mixture of experts runs transformers' own loop over its experts inside the block: the
    float64 reference cannot take the default grouped GEMMs (torch's grouped_mm has no float64)."""
    found = [m for m in model.modules() if getattr(m, "_can_set_experts_implementation", lambda: False)()]
    if not found:
        yield
        return
    original = found[0].get_experts_implementation()
    found[0].set_experts_implementation("eager")
    try:
        yield
    finally:
        found[0].set_experts_implementation(original)


@contextlib.contextmanager
def _float64_buffers(model: nn.Module) -> Iterator[None]:
    """The model's floating buffers (rotary frequencies, ...) as float64 copies inside the block."""
    saved = [(m._buffers, k, b) for m in model.modules() for k, b in m._buffers.items() if b is not None]
    try:
        for table, key, buffer in saved:
            if buffer.is_floating_point():
                table[key] = buffer.to(torch.float64)
        yield
    finally:
        for table, key, buffer in saved:
            table[key] = buffer


def _training_reference(model: nn.Module, *inputs: Any) -> Any:
    """The model with the harness's float64 parameters (installed by `forward_backward`) and its
    floating buffers in float64 too."""
    with _float64_buffers(model), _experts_looped(model):
        return model(*inputs)


def _logits(fn: Any, args: tuple) -> torch.Tensor:
    return fn(*args)


@functools.cache
def _cache_elements(architecture: str, size: str, batch: int, length: int) -> int:
    """Elements of the key/value cache a prompt of `length` tokens leaves (a sliding window's
    layers keep less), from a prefill of one sequence on the meta device (no padding token: GPT-2
    would look for it among the tokens, whose values meta tensors lack), or on the CPU with
    unset weights where the model needs values anyway (Mixtral's routing), times the batch."""
    dims = QUICK if size == "quick" else GPU
    for device in ("meta", "cpu"):
        try:
            with torch.no_grad():
                with torch.device("meta"):
                    model = BY_NAME[architecture].build(dims).eval()
                model = model.to_empty(device=device)
                model.config.pad_token_id = None
                ids = torch.zeros(1, length, dtype=torch.long, device=device)
                past = getattr(model(input_ids=ids), cache_name())
            return batch * sum(t.numel() for layer in past.layers for t in (layer.keys, layer.values))
        except (RuntimeError, NotImplementedError):
            if device == "cpu":
                raise
    raise AssertionError("unreachable")


def _itemsize(params: Params) -> int:
    return dtype_named(params["dtype"]).itemsize


def _logit_elements(params: Params) -> int:
    batch, length = params["tokens"]
    if BY_NAME[params["model"]].kind == VISION:
        return batch * 10
    return batch * length * _dims(params).vocabulary


def _inference_bytes(params: Params) -> int:
    return (parameter_count(params["model"], _dims(params)) + _logit_elements(params)) * _itemsize(params)


def _training_bytes(params: Params) -> int:
    return _inference_bytes(params) + 2 * parameter_count(params["model"], _dims(params)) * _itemsize(params)


def _decode_bytes(params: Params) -> int:
    batch, length = params["tokens"]
    cache = _cache_elements(params["model"], params["size"], batch, length)
    logits = batch * _dims(params).vocabulary
    return (parameter_count(params["model"], _dims(params)) + cache + logits) * _itemsize(params)


def _tokens(params: Params) -> int:
    batch, length = params["tokens"]
    if BY_NAME[params["model"]].kind == VISION:
        dims = _dims(params)
        return batch * (dims.image // dims.patch) ** 2
    return batch * length


def _decode_tokens(params: Params) -> int:
    return params["tokens"][0]


def _grid(models: list[str], quick: bool) -> dict[str, list[Any]]:
    if quick:
        return {"model": models, "size": ["quick"], "tokens": [(2, 16)], "dtype": ["float32"]}
    return {"model": models, "size": ["gpu"], "tokens": [(8, 512)], "dtype": ["bfloat16"]}


# NOTE: 8 layers of random weights in bf16 drift from the float64 reference more than one op does
_TOLERANCES = {torch.bfloat16: (1e-1, 1e-1), torch.float32: (1e-3, 1e-4)}
_COMMON: dict[str, Any] = {"fn": call_model, "tolerances": _TOLERANCES, "requires": ("transformers",)}

# NOTE: a token whose k-th and (k+1)-th experts nearly tie in the reference's router goes to the
# other expert where the router's logits are rounded to bf16 (eager as much as any compiler), and from
# that layer on its hidden state, hence its whole row of logits, is another one; every layer gives
# a token another chance to flip. A tenth of the rows leaves room for those tokens, while an error
# that touches every token (a wrong op, a wrong expert, shifted logits) still fails.
ROUTED_ROWS_MAY_DIFFER = 0.1


def routed_rows_may_differ(params: Params) -> float:
    """The fraction of the logits' token rows that may disagree with the reference as a whole: only
    for a model routing tokens to experts (`Architecture.routes_tokens`), 0 for every other."""
    return ROUTED_ROWS_MAY_DIFFER if BY_NAME[params["model"]].routes_tokens else 0.0


CASES = [
    Case(
        name="zoo_inference",
        mode="inference",
        make_inputs=_inference_inputs,
        bytes_moved=_inference_bytes,
        params=_grid(ALL, quick=False),
        quick_params=_grid(ALL, quick=True),
        headline={"model": ["llama", "mixtral", "bert"]},
        reference=_reference,
        rows_may_differ=routed_rows_may_differ,
        call=_logits,
        tokens=_tokens,
        description="transformers architectures (random configs): logits of the default call",
        **_COMMON,
    ),
    Case(
        name="zoo_training",
        mode="training",
        make_inputs=_training_inputs,
        bytes_moved=_training_bytes,
        params=_grid(ALL, quick=False),
        quick_params=_grid(ALL, quick=True),
        headline={"model": ["llama"]},
        reference=_training_reference,
        call=forward_backward,
        forward_call=forward_loss,
        tokens=_tokens,
        description="transformers architectures: loss (inputs as labels) and every parameter's gradient",
        **_COMMON,
    ),
    Case(
        name="zoo_decode",
        mode="decode",
        make_inputs=_decode_inputs,
        bytes_moved=_decode_bytes,
        params=_grid(list(DECODERS), quick=False),
        quick_params=_grid(list(DECODERS), quick=True),
        headline={"model": ["llama"]},
        reference=_reference,
        rows_may_differ=routed_rows_may_differ,
        tokens=_decode_tokens,
        description="transformers decoders: one new token per sequence over a prompt's key/value cache",
        **_COMMON,
    ),
]

globals().update(asv_benchmarks(__name__, CASES))
