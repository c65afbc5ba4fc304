"""The inputs of the zoo's models (suites/_models/hf_architectures.py), called as their model
cards call them, per kind of model: for the forward (logits; a decoder's default call keeps its
cache on) and for the call whose `loss` is backpropagated (`training`); and that loss
(`training_loss`); eager's outputs and gradients against a compiled call's (`assert_outputs_close`,
`assert_gradients_close`).
tests/compiler/models/test_hf_zoo.py, scripts/zoo_fallbacks.py and scripts/zoo_lengths.py call the zoo
so: tiny (`TINY`: `QUICK` sizes, float32, 2 sequences of 8 tokens), or at the sizes the hf_zoo
suite measures on a GPU (`AT_GPU_SIZES`: `GPU` sizes, bfloat16, 8 sequences of 512 tokens), where
some failures of a fusion compiler first show.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from suites._models.hf_architectures import (
    AUDIO,
    CAUSAL,
    GPU,
    MASKED,
    QUICK,
    SEQ2SEQ,
    SPEECH,
    TEXT_FEATURES,
    VISION,
    Architecture,
    Dims,
)


@dataclass(frozen=True)
class Scale:
    """The sizes a zoo model is built and called at: its config's `dims`, the parameters' and
    floating inputs' `dtype`, `batch` sequences of `sequence` tokens, `audio` samples of raw audio."""

    dims: Dims
    dtype: torch.dtype
    batch: int
    sequence: int
    audio: int


TINY = Scale(QUICK, torch.float32, batch=2, sequence=8, audio=400)
AT_GPU_SIZES = Scale(GPU, torch.bfloat16, batch=8, sequence=512, audio=16000)


def _tokens(generator: torch.Generator, scale: Scale) -> torch.Tensor:
    return torch.randint(0, scale.dims.vocabulary, (scale.batch, scale.sequence), generator=generator)


def _text(generator: torch.Generator, training: bool, scale: Scale) -> dict[str, torch.Tensor]:
    ids = _tokens(generator, scale)
    return {"input_ids": ids, "labels": ids} if training else {"input_ids": ids}


def _seq2seq(generator: torch.Generator, training: bool, scale: Scale) -> dict[str, torch.Tensor]:
    ids, target = _tokens(generator, scale), _tokens(generator, scale)
    return {"input_ids": ids, "labels": target} if training else {"input_ids": ids, "decoder_input_ids": target}


def _sequence_label(generator: torch.Generator, training: bool, scale: Scale) -> dict[str, torch.Tensor]:
    ids = _tokens(generator, scale)
    labels = torch.randint(0, 2, (scale.batch,), generator=generator)
    return {"input_ids": ids, "labels": labels} if training else {"input_ids": ids}


def _image(generator: torch.Generator, training: bool, scale: Scale) -> dict[str, torch.Tensor]:
    pixels = torch.randn(scale.batch, 3, scale.dims.image, scale.dims.image, generator=generator)
    labels = torch.randint(0, 2, (scale.batch,), generator=generator)
    return {"pixel_values": pixels, "labels": labels} if training else {"pixel_values": pixels}


def _speech(generator: torch.Generator, training: bool, scale: Scale) -> dict[str, torch.Tensor]:
    # Whisper's encoder takes 2 * max_source_positions frames of num_mel_bins features
    features = torch.randn(scale.batch, scale.dims.mel_bins, scale.dims.frames, generator=generator)
    target = _tokens(generator, scale)
    return (
        {"input_features": features, "labels": target}
        if training
        else {"input_features": features, "decoder_input_ids": target}
    )


def _audio(generator: torch.Generator, training: bool, scale: Scale) -> dict[str, torch.Tensor]:
    return {"input_values": torch.randn(scale.batch, scale.audio, generator=generator)}


# by the architecture's kind
INPUTS: dict[str, Callable[[torch.Generator, bool, Scale], dict[str, torch.Tensor]]] = {
    CAUSAL: _text,
    MASKED: _text,
    SEQ2SEQ: _seq2seq,
    TEXT_FEATURES: _sequence_label,
    VISION: _image,
    SPEECH: _speech,
    AUDIO: _audio,
}


def every_architecture() -> dict[str, Architecture]:
    """Every architecture of the zoo's two tables, by name."""
    from suites._models.hf_architectures import ZOO
    from suites._models.hf_more_architectures import MORE_ZOO

    return {a.name: a for a in (*ZOO, *MORE_ZOO)}


def tiny_model(zoo: Architecture, device: torch.device, scale: Scale = TINY) -> torch.nn.Module:
    """`zoo`'s model at `scale`'s sizes and dtype (`TINY` by default), its weights drawn from seed 0
    (transformers is imported here)."""
    import transformers

    config = zoo.build_config(scale.dims)
    torch.manual_seed(0)
    return getattr(transformers, zoo.model)(config).to(device=device, dtype=scale.dtype)


def call_inputs(
    zoo: Architecture, training: bool, device: torch.device, scale: Scale = TINY
) -> dict[str, torch.Tensor]:
    """The keyword inputs of `zoo`'s call as its model card makes it at `scale` (drawn from seed 1;
    floating ones in its dtype), with an all-ones attention mask where the architecture takes one."""
    drawn = INPUTS[zoo.kind](torch.Generator().manual_seed(1), training, scale)
    inputs = {k: v.to(device=device, dtype=scale.dtype if v.is_floating_point() else v.dtype) for k, v in drawn.items()}
    if zoo.attention_mask:
        inputs["attention_mask"] = torch.ones_like(inputs["input_ids"])
    return inputs


def training_loss(output: Any) -> torch.Tensor:
    """The output's loss, or for a model without a head, its first output against fixed random
    weights (NOTE: not a norm of it: a model ending in a layer norm makes that nearly constant,
    its gradients rounding noise)."""
    if getattr(output, "loss", None) is not None:
        return output.loss
    features = output[0]
    weights = torch.randn(features.shape, generator=torch.Generator().manual_seed(2), dtype=features.dtype)
    weights = weights.to(features.device)
    return (features * weights).sum()


GRADIENT_TOLERANCE = 1e-3  # ||g - g_eager|| / max(||g_eager||, floor)
# NOTE: some gradients are zero in exact arithmetic (attention's key bias: it adds one constant to a
# query's scores, which softmax ignores), so eager's own are rounding noise that no two summation
# orders reproduce; the floor, this fraction of the model's largest gradient norm, compares those
# by their size next to the others instead: with the tolerance, at about float32's epsilon times
# the largest gradient (Funnel's key biases are such zeros).
GRADIENT_NORM_FLOOR = 1e-4


def assert_gradients_close(model: torch.nn.Module, eager: torch.nn.Module, where: str) -> None:
    """Raises AssertionError (naming `where` and the parameter) unless each of `model`'s parameters
    has eager's gradient, or none where eager's has none, within `GRADIENT_TOLERANCE` of its norm
    (floored by `GRADIENT_NORM_FLOOR` times the largest gradient's)."""
    largest = max(p.grad.norm() for p in eager.parameters() if p.grad is not None)
    for (name, got), want in zip(model.named_parameters(), eager.parameters()):
        if (got.grad is None) != (want.grad is None):
            raise AssertionError(f"{where} {name}: gradient present in only one of the runs")
        if want.grad is None:
            continue
        error = (got.grad - want.grad).norm() / want.grad.norm().clamp_min(GRADIENT_NORM_FLOOR * largest)
        if not error <= GRADIENT_TOLERANCE:
            raise AssertionError(f"{where} {name}: gradient error {error:.2e}")


def assert_outputs_close(got: Any, want: Any, where: str, **tolerance: Any) -> None:
    """Raises AssertionError (naming the path from `where`) unless `got` matches eager's `want` leaf
    by leaf: tensors (`torch.testing.assert_close` with `tolerance`), transformers' caches, model
    outputs, dicts, tuples and lists of the same structure, other values equal."""
    import transformers

    def fail(message: str) -> None:
        raise AssertionError(f"{where}: {message}")

    if type(got) is not type(want):
        fail(f"{type(got).__name__} where eager gives {type(want).__name__}")
    if isinstance(want, torch.Tensor):
        torch.testing.assert_close(got, want, **tolerance, msg=lambda m: f"{where}: {m}")
    elif isinstance(want, transformers.cache_utils.EncoderDecoderCache):
        for part in ("self_attention_cache", "cross_attention_cache"):
            assert_outputs_close(getattr(got, part), getattr(want, part), f"{where}.{part}", **tolerance)
    elif isinstance(want, transformers.cache_utils.Cache):
        if len(got.layers) != len(want.layers):
            fail(f"{len(got.layers)} cache layers where eager has {len(want.layers)}")
        for index, (layer, expected) in enumerate(zip(got.layers, want.layers)):
            assert_outputs_close(vars(layer), vars(expected), f"{where}.layers[{index}]", **tolerance)
    elif isinstance(want, dict):  # NOTE: ModelOutput is a dict too
        if list(got.keys()) != list(want.keys()):
            fail(f"keys {list(got.keys())} != {list(want.keys())}")
        for key in want:
            assert_outputs_close(got[key], want[key], f"{where}.{key}", **tolerance)
    elif isinstance(want, (tuple, list)):
        if len(got) != len(want):
            fail(f"{len(got)} items where eager has {len(want)}")
        for index, (item, expected) in enumerate(zip(got, want)):
            assert_outputs_close(item, expected, f"{where}[{index}]", **tolerance)
    elif got != want:
        fail(f"{got!r} != {want!r}")
