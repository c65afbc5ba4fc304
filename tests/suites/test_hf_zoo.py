"""The hf_zoo suite: every architecture at the sizes it promises, its cases at quick sizes on CPU
through eager and the compiler (GPT-2's also through the dynamo backend, which never raises: what
our compiler lacks runs eagerly, counted), and nothing breaks where transformers is missing."""

from __future__ import annotations

import copy
import dataclasses
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers")

import compiler
from fusebench.cases.variants import EAGER, FUSEBENCH, FUSEBENCH_DYNAMO
from fusebench.measure.correctness import compare
from fusebench.measure.measure import Settings, check_result, measure_variant, prepare_case
from suites import hf_zoo
from suites._models.hf_architectures import ARCHITECTURES, DECODERS, GPU, QUICK, parameter_count

ROOT = Path(__file__).resolve().parents[2]
CPU_SETTINGS = Settings(device=torch.device("cpu"), budget_s=0.005, min_repeats=2)
CASES = {case.name: case for case in hf_zoo.CASES}
ISSUE_46 = {
    "gpt2", "gpt_neox", "gptj", "opt", "bloom", "falcon", "llama", "mistral", "mixtral", "qwen2", "qwen3", "phi3",
    "gemma", "gemma2", "bert", "roberta", "deberta_v2", "t5", "bart", "whisper", "vit",
}  # fmt: skip


def test_the_zoo_has_every_architecture_of_the_issue() -> None:
    assert {a.name for a in ARCHITECTURES} == ISSUE_46
    grid = CASES["zoo_inference"].grid(quick=False)
    assert {p["model"] for p in grid} == ISSUE_46 and {p["dtype"] for p in grid} == {"bfloat16"}
    assert {p["model"] for p in CASES["zoo_decode"].grid(quick=False)} == set(DECODERS)


@pytest.mark.slow
def test_every_architecture_has_50_to_150m_parameters_on_the_gpu_and_is_tiny_quick() -> None:
    counts = {a.name: parameter_count(a.name, GPU) for a in ARCHITECTURES}
    assert all(50e6 <= count <= 150e6 for count in counts.values()), counts
    assert all(parameter_count(a.name, QUICK) < 100_000 for a in ARCHITECTURES)


def test_the_decode_bytes_count_the_parameters_the_cache_and_the_logits() -> None:
    params = {"model": "llama", "size": "quick", "tokens": (2, 16), "dtype": "float32"}
    # 2 layers, 2 key/value heads of 8 = 16 wide: 2 sequences x 16 tokens, keys and values
    cache = 2 * 2 * (2 * 16 * 16)
    logits = 2 * QUICK.vocabulary
    assert CASES["zoo_decode"].bytes_moved(params) == (parameter_count("llama", QUICK) + cache + logits) * 4


def _measure(case_name: str, model: str, variants=(EAGER, FUSEBENCH_DYNAMO)) -> dict:
    case = CASES[case_name]
    params = next(p for p in case.grid(quick=True) if p["model"] == model)
    prepared = prepare_case("hf_zoo", case, params, CPU_SETTINGS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", compiler.UnsupportedFallback)
        return {v.name: measure_variant(prepared, v, CPU_SETTINGS) for v in variants}


@pytest.mark.parametrize(
    "case_name", ["zoo_inference", pytest.param("zoo_training", marks=pytest.mark.slow), "zoo_decode"]
)
def test_gpt2_cases_run_eagerly_and_through_the_dynamo_backend(case_name: str) -> None:
    outcomes = _measure(case_name, "gpt2")
    for name, outcome in outcomes.items():
        assert outcome.status == "ok", f"{name}: {outcome.detail}"
    dynamo = outcomes["fusebench-dynamo"]
    assert dynamo.fallbacks is not None and outcomes["eager"].fallbacks is None
    assert dynamo.recompilations == 0


ZOO = [
    (case_name, model)
    for case_name in CASES
    for model in sorted((set(DECODERS) if case_name == "zoo_decode" else ISSUE_46) - {"gpt2"})
]


@pytest.mark.slow
@pytest.mark.parametrize(("case_name", "model"), ZOO)
def test_every_zoo_case_runs_eagerly_and_through_the_compiler(case_name: str, model: str) -> None:
    # NOTE: through jit, the suite's headline variant; every architecture's dynamo graphs are
    # checked against eager in tests/compiler/models/test_hf_zoo.py, the suite's dynamo variant above
    outcomes = _measure(case_name, model, (EAGER, FUSEBENCH))
    for name, outcome in outcomes.items():
        assert outcome.status == "ok", f"{name}: {outcome.detail}"


def test_without_transformers_the_suite_is_listed_and_skipped_with_the_reason(tmp_path: Path) -> None:
    run = ["run", "--suite", "hf_zoo", "--variant", "eager", "-k", "gpt2", "--no-artifacts", "--results", str(tmp_path)]
    program = (
        "import sys\n"
        "sys.modules['transformers'] = None  # as if it were not installed\n"
        "from fusebench.cli import main\n"
        "assert main(['list', '--suite', 'hf_zoo', '-k', 'gpt2']) == 0\n"
        f"sys.exit(main({run!r}))\n"
    )
    done = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    reason = "transformers is not installed (pip install transformers)"
    assert f"model=gpt2, size=quick, tokens=(2, 16), dtype=float32  (skipped here: {reason})" in done.stdout
    table = [line for line in done.stdout.splitlines() if line.startswith(tuple(CASES))]
    assert len(table) == 3 and all(f"eager    skipped: {reason}" in line for line in table), done.stdout


# Mixtral wide enough that a token taking another expert moves its logits past bf16's tolerance
_MOE_DIMS = dataclasses.replace(QUICK, hidden=256, ffn=1024, vocabulary=128, positions=512)
_MOE_PARAMS = {"model": "mixtral", "size": "quick", "tokens": (4, 256), "dtype": "bfloat16"}


def _routers(model: torch.nn.Module) -> list[torch.nn.Module]:
    return [m for m in model.modules() if type(m).__name__ == "MixtralTopKRouter"]


@pytest.mark.slow
def test_mixtral_in_bf16_passes_eagerly_where_near_ties_route_tokens_elsewhere_and_wrong_results_fail(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(hf_zoo, "_dims", lambda params: _MOE_DIMS)
    case = CASES["zoo_inference"]
    prepared = prepare_case("hf_zoo", case, _MOE_PARAMS, CPU_SETTINGS)
    called, ids = prepared.args
    with torch.no_grad():
        logits = called(ids)
    # the float64 reference routes some tokens to other experts than bf16 does: whole rows differ
    assert compare(prepared.expected_output, logits, case.tolerance) is not None
    assert measure_variant(prepared, EAGER, CPU_SETTINGS).status == "ok"
    assert check_result(prepared, logits) is None

    def wrong_expert(module: torch.nn.Module, inputs: tuple, output: tuple) -> tuple:
        router_logits, weights, experts = output
        return router_logits, weights, (experts + 1) % module.num_experts

    hooks = [router.register_forward_hook(wrong_expert) for router in _routers(called)]
    with torch.no_grad():
        every_token_to_the_wrong_expert = called(ids)
    for hook in hooks:
        hook.remove()
    wrong_activation = copy.deepcopy(called)
    for experts in (m for m in wrong_activation.modules() if hasattr(m, "gate_up_proj")):
        experts.act_fn = torch.nn.ReLU()
    with torch.no_grad():
        relu_for_silu = wrong_activation(ids)
    for wrong in (logits + 0.2, every_token_to_the_wrong_expert, relu_for_silu):
        failure = check_result(prepared, wrong)
        assert failure is not None and "rows disagree, more than the" in failure[0], failure
