"""scripts/compile_profile.py on CPU: each program compiles through the fake nvFuser, and the
breakdown names the steps that ran (the numbers themselves are not checked)."""

from __future__ import annotations

import re

import pytest

from scripts import compile_profile


@pytest.mark.parametrize(
    ("program", "steps"),
    [
        ("gpt2-train", ["autodiff (joint trace)", "split_backward (min-cut)", "backward compile"]),
        ("gpt2-forward", ["computation: fuse", "prologue codegen"]),
        ("adam-gpt2", ["computation: functionalize", "computation: fuse"]),
    ],
)
def test_the_breakdown_lists_each_step_once_and_the_totals(program, steps, capsys):
    argv = ["--program", program, "--model", "tiny", "--tokens", "1", "8", "--device", "cpu", "--fake-nvfuser"]
    assert compile_profile.main(argv) == 0
    out = capsys.readouterr().out
    labels = [line[:48].strip() for line in out.splitlines()[2:] if line and not line.startswith(("-", " " * 3))]
    for step in ["tracing", "codegen", "nvFuser definitions", *steps]:
        assert step in labels, out
    assert "= host-side compile (all but the run)" in labels
    assert "= of which Python's garbage collector" in labels
    assert "slowest first runs of" in out and "nvFuser fake" in out


def test_fusion_options_reach_the_compiled_program(capsys):
    argv = ["--program", "adam-gpt2", "--model", "tiny", "--fake-nvfuser", "--fusion", "batch_numel=0"]
    assert compile_profile.main(argv) == 0
    apart = _fusions_run(capsys.readouterr().out)  # one fusion per parameter
    assert compile_profile.main([*argv, "merge_same_shape=True"]) == 0
    assert _fusions_run(capsys.readouterr().out) < apart  # one fusion per shape
    assert compile_profile.main(argv[:-2]) == 0
    assert _fusions_run(capsys.readouterr().out) < apart  # the small parameters batched


def _fusions_run(out: str) -> int:
    return int(re.search(r"slowest first runs of (\d+) fusions", out).group(1))


def test_each_repeat_defines_its_fusions_afresh(capsys):
    argv = ["--program", "adam-gpt2", "--model", "tiny", "--fake-nvfuser"]
    assert compile_profile.main(argv) == 0
    once = _definitions(capsys.readouterr().out)
    assert compile_profile.main([*argv, "--repeat", "2"]) == 0
    assert _definitions(capsys.readouterr().out) == once > 0  # the last compilation too, not reusing the first's


def _definitions(out: str) -> int:
    return int(re.search(r"(\d+) nvFuser definitions", out).group(1))


def test_a_zoo_architectures_training_step_is_profiled_and_a_bad_name_lists_the_zoo(capsys):
    pytest.importorskip("transformers")
    argv = ["--program", "zoo-train", "--model", "llama", "--device", "cpu", "--fake-nvfuser"]
    assert compile_profile.main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("zoo-train (model llama") and "backward compile" in out and _definitions(out) > 0
    with pytest.raises(SystemExit, match=r"--model 'lama' with zoo-train: expected one of gpt2, .*llama"):
        compile_profile.main(["--program", "zoo-train", "--model", "lama", "--device", "cpu"])
    with pytest.raises(SystemExit, match=r"--model 'llama' with gpt2-train: expected small or tiny"):
        compile_profile.main(["--program", "gpt2-train", "--model", "llama", "--device", "cpu"])
