"""Selection flags: suites, -k patterns, variant names and globs, quick and full grids."""

from __future__ import annotations

import argparse

import pytest
import torch

from fusebench.cases.discovery import discover
from fusebench.cases.selection import (
    Selection,
    add_selection_arguments,
    plan,
    plan_size,
    selection_from_args,
    variant_notes,
)
from fusebench.errors import FusebenchError


def parse(*argv: str) -> Selection:
    parser = argparse.ArgumentParser()
    add_selection_arguments(parser)
    return selection_from_args(parser.parse_args(list(argv)))


SUITES = discover()


def ids(selection: Selection) -> list[str]:
    return [group.case_id for group in plan(SUITES, selection)]


def test_defaults_on_a_machine_without_cuda_are_quick_sizes_on_cpu() -> None:
    if torch.cuda.is_available():
        pytest.skip("the defaults differ on a CUDA machine")
    selection = parse()
    assert (selection.device, selection.quick) == (torch.device("cpu"), True)
    assert parse("--full").quick is False


def test_suite_and_pattern_selection() -> None:
    assert ids(parse("--suite", "kv_cache_sdpa")) == [
        "kv_cache_sdpa.kv_cache_sdpa(shape=(1, 4, 256, 64, 1), dtype=bfloat16)",
        "kv_cache_sdpa.kv_cache_sdpa(shape=(1, 4, 256, 64, 32), dtype=bfloat16)",
    ]
    selected = ids(parse("-k", "BFLOAT16", "-k", "gpt-tiny"))
    assert len([i for i in selected if i.startswith("user_patterns.")]) == 42  # every case of it is bf16
    assert [i for i in selected if not i.startswith("user_patterns.")] == [
        "adam_step.adam_step(parameters=gpt-tiny, dtype=float32)",
        "gelu_backward.gelu_bias_backward(shape=(4, 64, 256), dtype=bfloat16)",
        "gpt2.gpt2_prefill(model=gpt2-tiny, tokens=(2, 32), dtype=bfloat16)",
        "gpt2.gpt2_decode(model=gpt2-tiny, tokens=(2, 32), dtype=bfloat16)",
        "gpt2.gpt2_train(model=gpt2-tiny, tokens=(2, 32), dtype=bfloat16)",
        "kv_cache_sdpa.kv_cache_sdpa(shape=(1, 4, 256, 64, 1), dtype=bfloat16)",
        "kv_cache_sdpa.kv_cache_sdpa(shape=(1, 4, 256, 64, 32), dtype=bfloat16)",
        "llama_block.llama_block_prefill(model=llama-tiny, tokens=(2, 32), dtype=bfloat16)",
        "llama_block.llama_block_decode(model=llama-tiny, tokens=(2, 32), dtype=bfloat16)",
        "llama_block.llama_block_train(model=llama-tiny, tokens=(2, 32), dtype=bfloat16)",
        "llm_norms.softmax(shape=(64, 512), dtype=bfloat16)",
        "llm_norms.log_softmax(shape=(64, 512), dtype=bfloat16)",
        "llm_norms.cross_entropy(shape=(64, 512), dtype=bfloat16)",
        "llm_norms.rms_norm(shape=(64, 256), dtype=bfloat16)",
        "llm_norms.layer_norm(shape=(64, 256), dtype=bfloat16)",
        "llm_norms.swiglu(shape=(64, 344), dtype=bfloat16)",
        "llm_norms.rotary(shape=(1, 4, 64, 32), dtype=bfloat16)",
        "training_steps.mlp_block(shape=(256, 64), dtype=bfloat16)",
        "training_steps.rmsnorm(shape=(256, 512), dtype=bfloat16)",
        "training_steps.layernorm(shape=(256, 512), dtype=bfloat16)",
        "training_steps.cross_entropy(shape=(64, 1000), dtype=bfloat16)",
        "training_steps.transformer_block(shape=(2, 32, 256), dtype=bfloat16)",
    ]
    assert ids(parse("-k", "*cache=symbolic)")) == [
        "dynamic_split.dynamic_split(shape=(2, 4, 256), dtype=float32, cache=symbolic)"
    ]


def test_variant_names_globs_and_case_specific_variants() -> None:
    groups = plan(SUITES, parse("--variant", "eager,torch.optim*"))
    adam = next(g for g in groups if g.case.name == "adam_step")
    assert [v.name for v in adam.variants] == [
        "eager",
        "torch.optim(foreach=False)",
        "torch.optim(foreach=True)",
        "torch.optim(fused=True)",
    ]
    gelu = next(g for g in groups if g.case.name == "gelu_bias_backward")
    assert [v.name for v in gelu.variants] == ["eager"]
    only_nvfuser = plan(SUITES, parse("--variant", "nvfuser"))
    assert {g.case.name for g in only_nvfuser} == {"gelu_bias_backward"}


def test_unknown_names_are_errors_that_list_the_known_ones() -> None:
    with pytest.raises(FusebenchError, match=r"--suite nope: no such suite; known suites: \['adam_step'"):
        plan(SUITES, parse("--suite", "nope"))
    with pytest.raises(FusebenchError, match=r"--variant jax: matches no variant; known variants: \["):
        plan(SUITES, parse("--variant", "jax"))


def test_a_variant_some_suites_lack_runs_where_it_exists_and_is_noted_where_not() -> None:
    selection = parse("--suite", "adam_step", "--suite", "host_overhead", "--variant", "eager,torch.optim(fused=True)")
    groups = plan(SUITES, selection)
    by_suite = {g.suite.name: {v.name for v in g.variants} for g in groups}
    assert by_suite == {"adam_step": {"eager", "torch.optim(fused=True)"}, "host_overhead": {"eager"}}
    assert variant_notes(SUITES, selection) == [
        "--variant torch.optim(fused=True): not in suite host_overhead; measured where it exists"
    ]
    with pytest.raises(FusebenchError, match=r"--variant torch.optim\(fused=True\): matches no variant"):
        plan(SUITES, parse("--suite", "host_overhead", "--variant", "eager,torch.optim(fused=True)"))


def _user_patterns(*argv: str) -> list:
    return [
        g
        for g in plan(SUITES, parse("--suite", "user_patterns", "--full", *argv))
        if "softmax__as_written" in g.case_id
    ]


def test_a_default_run_measures_each_cases_headline_with_the_default_variants() -> None:
    (group,) = [g for g in _user_patterns() if g.case.name == "softmax__as_written"]
    assert group.params["tokens"] == 8192
    assert [v.name for v in group.variants] == ["eager", "torch.compile", "fusebench", "thunder"]
    adam = next(g for g in plan(SUITES, parse("--suite", "adam_step")) if g.case.name == "adam_step")
    extras = [v.name for v in adam.case.extra_variants if v.default]
    assert extras and [v.name for v in adam.variants][-len(extras) :] == extras
    assert "fusebench(merged same-shape)" not in {v.name for v in adam.variants}  # opt-in
    overhead = plan(SUITES, parse("--suite", "host_overhead"))[0]
    assert {"torch.compile(reduce-overhead)", "fusebench-cudagraphs"} <= {v.name for v in overhead.variants}


def test_all_measures_every_combination_and_variant() -> None:
    groups = [g for g in _user_patterns("--all") if g.case.name == "softmax__as_written"]
    assert [g.params["tokens"] for g in groups] == [2048, 4096, 8192, 16384]
    assert all(len(g.variants) == 10 for g in groups)


def test_k_selects_among_every_combination_and_variant_among_every_variant() -> None:
    groups = [g for g in _user_patterns("-k", "softmax__as_written") if g.case.name == "softmax__as_written"]
    assert [g.params["tokens"] for g in groups] == [2048, 4096, 8192, 16384]
    assert [v.name for v in groups[0].variants] == ["eager", "torch.compile", "fusebench", "thunder"]
    (dynamo,) = [g for g in _user_patterns("--variant", "fusebench-dynamo") if g.case.name == "softmax__as_written"]
    assert dynamo.params["tokens"] == 8192 and [v.name for v in dynamo.variants] == ["fusebench-dynamo"]


def test_the_default_plan_is_a_fraction_of_everything() -> None:
    default, everything = plan(SUITES, parse("--full")), plan(SUITES, parse("--full", "--all"))
    assert plan_size(default) < plan_size(everything) / 4
    assert {g.case.name for g in default} == {g.case.name for g in everything}  # every case, fewer points


def test_workers_and_compare_sides_are_told_to_measure_everything() -> None:
    from fusebench.commands.compare import child_run_arguments

    assert "--all" in child_run_arguments(parse("--all"), 0.1)
    assert "--all" not in child_run_arguments(parse(), 0.1)
