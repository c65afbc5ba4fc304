"""What a default `fusebench run` measures, and what it says about it: the plan size (and what
`--all` would add) on the first line, `fusebench list` marking the default set, precision stopping."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from fusebench.cli import main

SWEEP_SUITE = """
import torch
from fusebench.cases.case import Case

CASES = [
    Case(
        name="scale",
        fn=lambda x: x * 3,
        make_inputs=lambda params, device, seed: (torch.ones(params["n"], device=device),),
        bytes_moved=lambda params: 8 * params["n"],
        params={"n": [4, 8, 16]},
    )
]
"""


@pytest.fixture
def suites(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FUSEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "suites"
    folder.mkdir()
    (folder / "sweep.py").write_text(textwrap.dedent(SWEEP_SUITE))
    return folder


def _run(suites: Path, tmp_path: Path, *argv: str) -> int:
    base = ["run", "--suites", str(suites), "--device", "cpu", "--repeat-budget", "0.01"]
    return main([*base, "--results", str(tmp_path / "results"), "--no-artifacts", *argv])


def test_a_default_run_says_how_many_measurements_and_how_many_more_all_adds(
    suites: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    status = _run(suites, tmp_path, "--variant", "eager")
    err = capsys.readouterr().err
    assert status == 0
    first = err.splitlines()[0]
    assert first.startswith("fusebench run: 1 measurements (each case's headline; --all: 2 more) on cpu"), first
    assert "up to 0.01 s of repeats each (less once the median is known to 1%)" in first
    assert "[1/1] sweep.scale(n=4) eager ... " in err


def test_all_measures_the_sweep_and_precision_zero_spends_the_budget(
    suites: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    status = _run(suites, tmp_path, "--variant", "eager", "--all", "--precision", "0")
    err = capsys.readouterr().err
    assert status == 0
    assert err.splitlines()[0].startswith("fusebench run: 3 measurements on cpu (quick sizes), 0.01 s of repeats each")
    assert all(f"sweep.scale(n={n}) eager ... " in err for n in (4, 8, 16))


def test_list_shows_the_default_set_and_marks_the_rest_with_all(suites: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["list", "--suites", str(suites), "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == (
        "1 parameter combinations, 4 measurements on cpu (quick sizes); "
        "each case's headline (--all: 2 more combinations, 26 more measurements)"
    )
    assert "n=8" not in out
    assert "with --all or --variant also: torch.compile(reduce-overhead), fusebench-torch, fusebench-inductor" in out
    assert main(["list", "--suites", str(suites), "--device", "cpu", "--all"]) == 0
    out = capsys.readouterr().out
    assert "n=8  (64 bytes moved at least)  [--all]" in out and "n=4  (32 bytes moved at least)\n" in out
    assert "fusebench-dynamo [--all]" in out and "eager, " in out


def test_list_with_k_marks_the_combinations_a_default_run_leaves_out(
    suites: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["list", "--suites", str(suites), "--device", "cpu", "-k", "n=16", "--variant", "eager"]) == 0
    out = capsys.readouterr().out
    assert "n=16  (128 bytes moved at least)  [--all]" in out and "variants: eager\n" in out
