"""scripts/zoo_lengths: the zoo's models over changing input sizes, their entries and recompilations."""

from __future__ import annotations

import pytest
import torch

import compiler
from scripts import zoo_lengths
from scripts.zoo_lengths import check, sized
from suites._models.hf_zoo_inputs import every_architecture

pytest.importorskip("transformers")

CPU = torch.device("cpu")


def test_a_model_over_four_lengths_is_two_entries_and_each_mode_prints_a_line(capsys):
    assert zoo_lengths.main(["--models", "gpt2", "--modes", "forward,training"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "gpt2 forward over [8, 6, 4, 7]: ok, 2 entries",
        "gpt2 training over [8, 6, 4, 7]: ok, 2 entries",
    ]


def test_more_entries_print_each_recompilation_and_a_disagreement_fails_the_run(monkeypatch, capsys):
    outcome = check(every_architecture()["gpt2"], "forward", "batch", (4, 3, 2, 1), CPU)
    assert outcome.error is None and outcome.entries == 3  # a batch of 1 broadcasts otherwise: its own entry
    assert "call 4: recompiled" in str(outcome) and "size of input_ids" in str(outcome)

    def disagree(got, want, where, **tolerance):
        raise AssertionError(f"{where}: logits differ")

    monkeypatch.setattr(zoo_lengths, "assert_outputs_close", disagree)
    assert zoo_lengths.main(["--models", "gpt2", "--sizes", "8,6"]) == 1
    assert (
        capsys.readouterr().out == "gpt2 forward over [8, 6]: FAILED AssertionError: gpt2 at length 8: logits differ\n"
    )


def test_sizes_cut_sequences_or_repeat_the_batch():
    inputs = {"input_ids": torch.arange(16).reshape(2, 8), "scale": torch.tensor(2.0)}
    assert sized(inputs, "length", 5)["input_ids"].tolist() == [list(range(5)), list(range(8, 13))]
    assert sized(inputs, "batch", 3)["input_ids"][:, 0].tolist() == [0, 8, 0]
    assert sized(inputs, "batch", 3)["scale"] is inputs["scale"]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--models", "gpt2,gpt5"], "no architecture named gpt5 in the zoo; it has "),
        (["--models", "gpt2", "--modes", "inference"], "--modes: 'inference'; expected forward, training or both"),
        (["--models", "gpt2", "--sizes", "8,16"], "--sizes: a length above the tiny inputs' 8 tokens (16)"),
    ],
)
def test_bad_arguments_are_refused_naming_what_is_expected(argv, said, capsys):
    with pytest.raises(SystemExit) as raised:
        zoo_lengths.main(argv)
    assert raised.value.code == 2 and said in capsys.readouterr().err


def test_a_size_eager_refuses_must_be_refused_alike_by_the_compiled_model(monkeypatch):
    # eight samples of audio are shorter than hubert's first convolution's kernel: both raise RuntimeError
    outcome = check(every_architecture()["hubert"], "forward", "length", (8,), CPU)
    assert (
        str(outcome)
        == "hubert forward over [8]: ok, 0 entries (eager and compiled raise alike at length 8: RuntimeError)"
    )
    monkeypatch.setattr(compiler, "jit", lambda model: lambda **inputs: None)
    outcome = check(every_architecture()["hubert"], "forward", "length", (8,), CPU)
    assert outcome.error.startswith("AssertionError: hubert at length 8: eager raises RuntimeError: ")
    assert outcome.error.endswith("; compiled returns")
