"""Hugging Face transformers architectures as users bring them (tiny random configurations, nothing
downloaded: the tables suites/_models/hf_architectures.py, which the hf_zoo suite runs at larger
sizes, and hf_more_architectures.py), called as their model cards call them, through `compiler.jit(model)` and
`torch.compile(model, backend="fusebench")`, against eager: the forward's whole output tree (a
decoder's default call returns its cache, which must hold eager's keys and values and work for
the next step), and a training call's loss and every parameter's gradient.

Models and inputs are made on the CPU, or on the device FUSEBENCH_ZOO_DEVICE names (`cuda` runs
them through the default executors there: nvFuser, fused attention, cuDNN). A fusion nvFuser fails
on runs with torch, so these tests still pass: scripts/zoo_fallbacks.py lists such fusions."""

from __future__ import annotations

import copy
import os
import warnings
from typing import Any

import pytest
import torch

import compiler
from suites._models.hf_architectures import ZOO, ZOO_BY_NAME, Architecture
from suites._models.hf_more_architectures import MORE_ZOO
from suites._models.hf_zoo_inputs import (
    assert_gradients_close,
    assert_outputs_close,
    call_inputs,
    tiny_model,
    training_loss,
)
from tests.support.nvfuser_helpers import fake_nvfuser  # noqa: F401 (a fixture)

transformers = pytest.importorskip("transformers")

DEVICE = torch.device(os.environ.get("FUSEBENCH_ZOO_DEVICE", "cpu"))
TOLERANCE = {"atol": 1e-4, "rtol": 1e-4}


def _compile(model: torch.nn.Module, entry: str) -> Any:
    if entry == "jit":
        return compiler.jit(model)
    torch._dynamo.reset()
    return torch.compile(model, backend="fusebench")


# NOTE: the whole zoo takes minutes on two CPU cores (each case compiles a model, dynamo's cases
# twice); GPT-2 and Llama, a decoder's default call in each family, run by default, the rest are slow.
DEFAULT = ("gpt2", "llama")
# NOTE: architectures in the zoo for an op the others lack (pooling, multi-head attention, expm1,
# random masking, LongT5's local attention, DeBERTa's tensor slice bounds, Gemma-3n's tensor.data)
# run one case each, the training call through jit (its output and every gradient): the ops are the
# same through dynamo, and the suite's time is bounded
ONE_CASE = (
    "apertus", "funnel", "deberta", "longt5", "siglip_vision", "poolformer", "vit_mae", "sew", "wavlm", "gemma3n_text",
)  # fmt: skip
# NOTE: jit refuses LED by design; its own test checks that and the dynamo backend's fallback
OWN_TEST = ("led",)
# NOTE: the further architectures (suites/_models/hf_more_architectures.py) run the training call
# through jit, as ONE_CASE's do, every other one of them, unless FUSEBENCH_ZOO_ALL=1 asks for every
# entry and mode of every architecture (as before a release, or on a GPU machine where the whole
# matrix is quick): the default test run's time is bounded
EVERY_CASE = os.environ.get("FUSEBENCH_ZOO_ALL", "0") == "1"
ONE_CASE_ARCHITECTURES = () if EVERY_CASE else (*ONE_CASE, *(zoo.name for zoo in MORE_ZOO[::2]))
NOT_BY_DEFAULT = () if EVERY_CASE else tuple(zoo.name for zoo in MORE_ZOO[1::2])
# NOTE: dynamo's cases cost most (dynamo traces the model, then the compiler its graphs): beyond
# DEFAULT, each architecture of the table runs through dynamo once, its forward or its training
# call by turns down the table, and through jit both (FUSEBENCH_ZOO_ALL=1 runs both through dynamo)
DYNAMO_MODE = {zoo.name: "forward" if i % 2 else "training" for i, zoo in enumerate(ZOO) if zoo.name not in DEFAULT}


def _by_default(zoo: Architecture, entry: str, mode: str) -> bool:
    if zoo.name in OWN_TEST or zoo.name in NOT_BY_DEFAULT:
        return False
    if zoo.name in ONE_CASE_ARCHITECTURES:
        return (entry, mode) == ("jit", "training")
    return EVERY_CASE or entry == "jit" or DYNAMO_MODE.get(zoo.name, mode) == mode


def _case(zoo: Architecture, entry: str, mode: str) -> Any:
    reason = zoo.known_failures.get(f"{entry}-{mode}", zoo.known_failures.get(entry))
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    marks += [] if zoo.name in DEFAULT else [pytest.mark.slow]
    return pytest.param(zoo, entry, mode, id=f"{zoo.name}-{entry}-{mode}", marks=marks)


CASES = [
    _case(zoo, entry, mode)
    for zoo in ZOO + MORE_ZOO
    for entry in ("jit", "dynamo")
    for mode in ("forward", "training")
    if _by_default(zoo, entry, mode)
]


@pytest.mark.parametrize(("zoo", "entry", "mode"), CASES)
def test_matches_eager(zoo: Architecture, entry: str, mode: str) -> None:
    training = mode == "training"
    eager = tiny_model(zoo, DEVICE).train(training)
    model = copy.deepcopy(eager)
    compiled = _compile(model, entry)
    inputs = call_inputs(zoo, training, DEVICE)
    with torch.set_grad_enabled(training):
        # NOTE: the same seed before each call: a model that draws random numbers (ViT-MAE's masking,
        # a router's jitter in training) draws the same ones compiled, as the compiler draws as eager
        torch.manual_seed(3)
        output = compiled(**copy.deepcopy(inputs))
        torch.manual_seed(3)
        expected = eager(**inputs)
    assert_outputs_close(output, expected, zoo.name, **TOLERANCE)
    cache_key = next((key for key in ("cache", "past_key_values") if expected.get(key) is not None), None)
    if cache_key is not None and not training:
        # the compiled call's cache serves eager's next step as eager's own does
        tokens = "decoder_input_ids" if "decoder_input_ids" in inputs else "input_ids"
        step = {**inputs, tokens: inputs[tokens][:, -1:]}
        following = eager(**step, **{cache_key: output[cache_key]})
        reference = eager(**step, **{cache_key: expected[cache_key]})
        assert_outputs_close(following.logits, reference.logits, f"{zoo.name} next step", **TOLERANCE)
    if not training:
        return
    training_loss(output).backward()
    training_loss(expected).backward()
    assert_gradients_close(model, eager, zoo.name)


# NOTE: Falcon (its MLP output, a matmul reshaped to 3-d, added to in place) compiled an entry per
# length; Mixtral's router (an arange of the token count per layer) raised from its computation
# where regions are formed (nvFuser's, here its torch-evaluated fake: the tests' CPU executor is torch)
CHANGING_LENGTHS = [("gpt2", "forward"), ("falcon", "forward"), ("mixtral", "forward"), ("llama", "training")]


@pytest.mark.parametrize(("name", "mode"), CHANGING_LENGTHS, ids=[f"{n}-{m}" for n, m in CHANGING_LENGTHS])
@pytest.mark.usefixtures("fake_nvfuser")
def test_changing_sequence_lengths_compile_twice_and_match_eager(name: str, mode: str) -> None:
    """A model called as its card calls it, at four sequence lengths: automatic dynamic makes the
    length symbolic at the second, so the third and fourth reuse that entry; every output (and in
    training every gradient) as eager's."""
    zoo, training = ZOO_BY_NAME[name], mode == "training"
    eager = tiny_model(zoo, DEVICE).train(training)
    model = copy.deepcopy(eager)
    compiled = compiler.jit(model, executors=["nvfuser", "sdpa", "torch"])
    full = call_inputs(zoo, training, DEVICE)
    for length in (8, 6, 4, 7):
        inputs = {key: value[:, :length] if value.ndim > 1 else value for key, value in full.items()}
        with torch.set_grad_enabled(training):
            output, expected = compiled(**copy.deepcopy(inputs)), eager(**inputs)
        assert_outputs_close(output, expected, f"{name} at length {length}", **TOLERANCE)
        if training:
            training_loss(output).backward()
            training_loss(expected).backward()
            for (key, got), want in zip(model.named_parameters(), eager.parameters()):
                torch.testing.assert_close(got.grad, want.grad, **TOLERANCE, msg=lambda m, k=key: f"{k}: {m}")
            model.zero_grad(set_to_none=True)
            eager.zero_grad(set_to_none=True)
    assert len(compiled.entries) == 2, str(compiler.examine.recompilations(compiled))


class _Unsupported(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.special.i0e(x)  # no decomposition registered


def test_an_unsupported_op_is_one_line_naming_op_module_and_source_line() -> None:
    model = tiny_model(next(zoo for zoo in ZOO if zoo.name == "gpt2"), DEVICE)
    model.transformer.h[1].mlp.act = _Unsupported()
    ids = torch.zeros(1, 4, dtype=torch.long, device=DEVICE)
    with pytest.raises(NotImplementedError) as raised:
        compiler.jit(model)(input_ids=ids)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("torch.special.i0e is not supported by the fusebench compiler (called at ")
    assert f"{__file__}:" in message and "return torch.special.i0e(x)" in message
    assert message.endswith("[while tracing module 'transformer.h.1.mlp.act' (_Unsupported)]")


def test_value_dependent_control_flow_is_one_line_from_jit_and_a_counted_fallback_in_dynamo() -> None:
    """LED's encoder branches on `.item()` of its input: `compiler.jit` names the op, the source
    line and the module in one line; the dynamo backend runs the graph break eagerly, counts it,
    and gives eager's output."""
    model = tiny_model(ZOO_BY_NAME["led"], DEVICE).eval()
    inputs = call_inputs(ZOO_BY_NAME["led"], False, DEVICE)
    with pytest.raises(compiler.core.errors.TracingError) as raised:
        compiler.jit(copy.deepcopy(model))(**inputs)
    message = str(raised.value)
    assert "\n" not in message and message.startswith("tensor.item() needs the value of a tensor"), message
    assert "modeling_led.py:" in message and ".item()" in message.split("called at", 1)[1], message
    assert message.endswith("[while tracing module 'led.encoder' (LEDEncoder)]"), message
    before = compiler.examine.fallbacks_recorded()
    with torch.no_grad(), warnings.catch_warnings():  # NOTE: warned once per process: not asserted
        warnings.simplefilter("ignore")
        output = _compile(copy.deepcopy(model), "dynamo")(**inputs)
        expected = model(**inputs)
    torch.testing.assert_close(output.logits, expected.logits, **TOLERANCE)
    fallbacks = str(compiler.examine.fallbacks(since=before))
    assert "modeling_led.py:" in fallbacks and ".item()" in fallbacks, fallbacks
