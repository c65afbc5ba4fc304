"""scripts/zoo_fallbacks: the zoo's fusions that fell back to torch, per model and grouped by error."""

from __future__ import annotations

import dataclasses
import json
import subprocess

import pytest
import torch

from compiler.executors.nvfuser.executor import TorchRunner
from scripts import zoo_fallbacks
from scripts.zoo_fallbacks import ARCHITECTURES, Sweep, grouped, sweep_one
from suites._models.hf_zoo_inputs import AT_GPU_SIZES, TINY

pytest.importorskip("transformers")

CPU = torch.device("cpu")
FAILURE = (
    "Expected found_non_rfactor_reduction . Must have at least one reduction axis not marked as rfactor.\n"
    "Exception raised from rFactor at /workspace/Fuser/csrc/tensor_view.cpp:912 (most recent call first):\n"
)
SAID = "RuntimeError: tensor_view.cpp:912: Expected found_non_rfactor_reduction . Must have at least one reduction axis not marked as rfactor."  # noqa: E501


def test_a_training_run_lists_the_fusions_that_fell_back_each_way_and_writes_their_repros(monkeypatch, tmp_path):
    run = TorchRunner.run

    def failing_first(self, fusion, args, key):
        if fusion.name == "nvFusion0":
            raise RuntimeError(FAILURE)
        return run(self, fusion, args, key)

    monkeypatch.setattr(TorchRunner, "run", failing_first)
    result = sweep_one(
        ARCHITECTURES["gpt2"], "training", CPU, ["nvfuser", "torch"], {"runner": "torch"}, repros=tmp_path
    )
    assert result.error is None
    assert [(name, said) for name, said, _ in result.fell_back] == [("nvFusion0", SAID), ("backward nvFusion0", SAID)]
    # the pieces nvFusion0 was cut into do not fail (only the fusion named nvFusion0 does)
    assert all(runs_as.endswith("nvFuser fusions of its pieces") for _, _, runs_as in result.fell_back)
    assert result.fusions > 2
    forward, backward = (runs_as for _, _, runs_as in result.fell_back)
    assert str(result) == (
        f"gpt2 training: {result.fusions} fusions, 2 fell back: "
        f"nvFusion0 (now {forward}), backward nvFusion0 (now {backward})"
    )
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == ["gpt2_training_backward_nvFusion0.py", "gpt2_training_forward_nvFusion0.py"]
    for name in written:
        assert (tmp_path / name).read_text().startswith('"""Repro for nvFusion0 (written by fusebench')


def test_fallbacks_are_grouped_by_what_the_compiler_said_most_frequent_first():
    results = [
        Sweep("gpt2", "training", 9, [("nvFusion0", "B", "torch"), ("backward nvFusion0", "A", "torch")]),
        Sweep("llama", "forward", 5, [("nvFusion3", "A", "torch")]),
        Sweep("bert", "forward", 4),
    ]
    assert grouped(results).splitlines() == [
        "2 x A",
        "    gpt2 training backward nvFusion0, llama forward nvFusion3",
        "1 x B",
        "    gpt2 training nvFusion0",
    ]
    assert grouped(results[2:]) == ""


def test_a_model_that_fails_whole_is_reported_with_its_error():
    broken = dataclasses.replace(ARCHITECTURES["gpt2"], model="NoSuchModelForCausalLM")
    result = sweep_one(broken, "forward", CPU)
    assert result.error is not None and result.error.startswith("AttributeError: ")
    assert str(result).startswith("gpt2 forward: FAILED: AttributeError: ")


def test_unknown_models_and_modes_are_refused_naming_what_is_expected(capsys):
    with pytest.raises(SystemExit):
        zoo_fallbacks.main(["--models", "gpt2,gpt5"])
    assert "unknown architectures ['gpt5']" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        zoo_fallbacks.main(["--models", "gpt2", "--modes", "inference"])
    assert "--modes: expected a comma-separated list of ('forward', 'training')" in capsys.readouterr().err


def test_the_pieces_of_a_fusion_that_failed_too_get_repros(monkeypatch, tmp_path):
    run = TorchRunner.run

    def failing_big_pieces(self, fusion, args, key):  # nvFusion0 and its pieces of more than 6 prims fail
        if fusion.name.startswith("nvFusion0") and len(fusion.region.bsyms) > 6:
            raise RuntimeError(FAILURE)
        return run(self, fusion, args, key)

    monkeypatch.setattr(TorchRunner, "run", failing_big_pieces)
    result = sweep_one(
        ARCHITECTURES["gpt2"], "forward", CPU, ["nvfuser", "torch"], {"runner": "torch"}, repros=tmp_path
    )
    (fusion, _, runs_as) = result.fell_back[0]
    assert fusion == "nvFusion0" and "nvFuser fusion" in runs_as
    pieces = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("gpt2_forward_forward_nvFusion0_"))
    assert pieces, sorted(p.name for p in tmp_path.iterdir())
    for name in pieces:
        piece = name.removeprefix("gpt2_forward_forward_").removesuffix(".py")
        assert (tmp_path / name).read_text().startswith(f'"""Repro for {piece} (written by fusebench')


def test_with_jobs_each_architecture_runs_in_a_process_of_its_own(capsys):
    assert zoo_fallbacks.main(["--models", "gpt2", "--modes", "forward", "--jobs", "1", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("gpt2 forward: ") and " fusions, 0 fell back" in out.splitlines()[0], out
    assert "1 runs: 0 fusions fell back (to pieces or torch), 0 runs failed whole" in out


def test_a_child_that_crashes_or_stops_early_fails_the_modes_it_did_not_print():
    said = Sweep("bloom", "forward", 7, [("nvFusion1", "RuntimeError: x", "2 nvFuser fusions of its pieces")])
    printed = zoo_fallbacks.JSON_PREFIX + json.dumps(dataclasses.asdict(said))
    crashed = subprocess.CompletedProcess(
        [], -11, stdout=f"noise\n{printed}\n", stderr="Fatal Python error: Segmentation fault\n\n"
    )
    forward, training = zoo_fallbacks.child_results("bloom", ["forward", "training"], crashed)
    assert forward == said
    assert (
        str(training) == "bloom training: FAILED: the process crashed (SIGSEGV): Fatal Python error: Segmentation fault"
    )
    exited = subprocess.CompletedProcess([], 1, stdout="", stderr="")
    (only,) = zoo_fallbacks.child_results("bloom", ["forward"], exited)
    assert only.error == "the process exited with status 1"


def test_bad_jobs_and_timeouts_are_refused(capsys):
    for argv, said in (
        (["--jobs", "-1"], "--jobs: expected 0 or more processes, got -1"),
        (["--timeout", "0"], "--timeout: expected seconds > 0, got 0.0"),
    ):
        with pytest.raises(SystemExit):
            zoo_fallbacks.main(["--models", "gpt2", *argv])
        assert said in capsys.readouterr().err


def test_a_sweep_runs_the_model_at_its_scale_and_a_child_gets_the_size(monkeypatch):
    half = dataclasses.replace(TINY, dtype=torch.bfloat16, batch=3)
    seen = []
    run = TorchRunner.run

    def recording(self, fusion, args, key):
        seen.extend(a.dtype for a in args if isinstance(a, torch.Tensor) and a.is_floating_point())
        return run(self, fusion, args, key)

    monkeypatch.setattr(TorchRunner, "run", recording)
    result = sweep_one(ARCHITECTURES["gpt2"], "forward", CPU, ["nvfuser", "torch"], {"runner": "torch"}, scale=half)
    assert result.error is None and result.fusions > 0 and set(seen) == {torch.bfloat16}
    commands = []
    monkeypatch.setattr(
        zoo_fallbacks.subprocess,
        "run",
        lambda command, **_: commands.append(command) or subprocess.CompletedProcess([], 0, "", ""),
    )
    zoo_fallbacks.main(["--models", "gpt2", "--modes", "forward", "--jobs", "1", "--size", "gpu", "--device", "cpu"])
    assert commands and commands[0][commands[0].index("--size") + 1] == "gpu"
    assert zoo_fallbacks.SIZES["gpu"] is AT_GPU_SIZES
