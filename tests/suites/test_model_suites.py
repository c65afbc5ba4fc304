"""The model suites: parameter counts behind their bytes models, tokens per call, and the
fusebench-dynamo variant on a model case."""

from __future__ import annotations

import torch

from fusebench.cases.variants import FUSEBENCH_DYNAMO
from fusebench.measure.measure import Settings, measure_variant, prepare_case
from suites import gpt2, llama_block
from suites._models.gpt import GPT, GPTConfig
from suites._models.llama import LlamaBlock, LlamaConfig

CPU_SETTINGS = Settings(device=torch.device("cpu"), budget_s=0.005, min_repeats=2)


def case(module, name: str):
    return next(c for c in module.CASES if c.name == name)


def test_gpt2_small_has_124m_parameters_as_the_bytes_model_counts() -> None:
    with torch.device("meta"):
        model = GPT(GPTConfig.small())
    count = sum(p.numel() for p in model.parameters())  # the tied LM head counted once
    assert round(count / 1e6) == 124
    params = {"model": "gpt2-small", "tokens": (8, 1024), "dtype": "bfloat16"}
    assert gpt2._parameter_bytes(params) == 2 * count
    assert case(gpt2, "gpt2_prefill").tokens(params) == 8192 and case(gpt2, "gpt2_decode").tokens(params) == 8


def test_the_llama_block_has_the_weights_its_bytes_model_counts() -> None:
    with torch.device("meta"):
        block = LlamaBlock(LlamaConfig.llama3_8b())
    count = sum(p.numel() for p in block.parameters())
    assert round(count / 1e6) == 218
    assert llama_block._weight_bytes({"model": "llama3-8b", "dtype": "bfloat16"}) == 2 * count


def test_the_dynamo_backend_variant_matches_on_a_model_case() -> None:
    params = case(gpt2, "gpt2_decode").grid(quick=True)[0]
    prepared = prepare_case("gpt2", case(gpt2, "gpt2_decode"), params, CPU_SETTINGS)
    outcome = measure_variant(prepared, FUSEBENCH_DYNAMO, CPU_SETTINGS)
    assert outcome.status == "ok", outcome.detail
    assert outcome.tokens_per_second is not None and outcome.tokens_per_second > 0
    assert outcome.fusions_per_call == 0  # the graphs' fusions are counted (none with CPU's executors)


def test_a_case_whose_requirement_is_missing_is_skipped_with_the_reason() -> None:
    import dataclasses

    missing = dataclasses.replace(case(gpt2, "gpt2_decode"), requires=("no_such_module_for_fusebench",))
    prepared = prepare_case("gpt2", missing, missing.grid(quick=True)[0], CPU_SETTINGS)
    outcome = measure_variant(prepared, FUSEBENCH_DYNAMO, CPU_SETTINGS)
    assert outcome.status == "skipped"
    assert outcome.detail == "no_such_module_for_fusebench is not installed (pip install no_such_module_for_fusebench)"
