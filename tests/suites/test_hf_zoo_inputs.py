"""suites/_models/hf_zoo_inputs: the zoo's models and calls at a scale: tiny by default, or at the
sizes the hf_zoo suite measures on a GPU (8 sequences of 512 tokens, bfloat16)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

pytest.importorskip("transformers")

from suites._models.hf_architectures import AUDIO, CAUSAL, GPU, SEQ2SEQ, SPEECH, VISION
from suites._models.hf_zoo_inputs import AT_GPU_SIZES, INPUTS, TINY, call_inputs, every_architecture, tiny_model

CPU = torch.device("cpu")
ZOO = every_architecture()


def _one_of(kind: str):
    return next(zoo for zoo in ZOO.values() if zoo.kind == kind)


@pytest.mark.parametrize("kind", sorted(INPUTS))
@pytest.mark.parametrize("training", [False, True])
def test_each_kind_of_call_is_drawn_at_the_gpu_sizes(kind: str, training: bool) -> None:
    inputs = call_inputs(_one_of(kind), training, CPU, AT_GPU_SIZES)
    for name, value in inputs.items():
        assert value.shape[0] == AT_GPU_SIZES.batch, name
        assert value.dtype in (torch.bfloat16, torch.int64), (name, value.dtype)
    first = inputs[next(iter(inputs))]
    if kind in (CAUSAL, SEQ2SEQ):
        assert first.shape == (8, 512) and int(first.max()) < GPU.vocabulary
    if kind == VISION:
        assert first.shape == (8, 3, GPU.image, GPU.image) and first.dtype is torch.bfloat16
    if kind == SPEECH:
        assert first.shape == (8, GPU.mel_bins, GPU.frames)
    if kind == AUDIO:
        assert first.shape == (8, AT_GPU_SIZES.audio)


def test_the_default_scale_is_tiny_and_a_scale_sets_the_models_dtype() -> None:
    zoo = ZOO["gpt2"]
    assert all(torch.equal(a, b) for a, b in zip(call_inputs(zoo, True, CPU).values(),
                                                 call_inputs(zoo, True, CPU, TINY).values()))  # fmt: skip
    assert call_inputs(zoo, False, CPU)["input_ids"].shape == (TINY.batch, TINY.sequence)
    half = dataclasses.replace(TINY, dtype=torch.bfloat16)
    model = tiny_model(zoo, CPU, half)
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    assert model(**call_inputs(zoo, False, CPU, half)).logits.dtype is torch.bfloat16
