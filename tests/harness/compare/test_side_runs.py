"""Each round of a comparison measures every variant again: its `fusebench run` never reuses a peer
measured by an earlier round (fusebench.history.peer_cache), which would repeat the same samples; an
environment variable says so, which a revision older than the peer cache ignores."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fusebench.compare import interleave


def test_a_side_run_measures_peers_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    environments: list[dict] = []

    class Finished:
        stderr: list[str] = []

        def __init__(self, command: list[str], env: dict, **kwargs: object) -> None:
            environments.append(env)

        def wait(self) -> int:
            return 0

        def poll(self) -> int:
            return 0

    monkeypatch.setattr(subprocess, "Popen", Finished)
    side = interleave.Side("A", "main", "a" * 40, tmp_path)
    run = interleave.run_side(side, ["--device", "cpu"], tmp_path, 0, lambda line: None)
    assert run.error and environments[0]["FUSEBENCH_REUSE_PEERS"] == "0"
    assert environments[0]["FUSEBENCH_PAIRED"] == "0"  # compare decides between revisions, not peers


PAIRS_SUITE = """
import torch
from fusebench.cases import Case


def _inputs(params, device, seed):
    return (torch.rand(params["n"], generator=torch.Generator().manual_seed(seed)).to(device),)


CASES = [
    Case(name=name, fn=lambda x: x * 2 + 1, make_inputs=_inputs, bytes_moved=lambda p: 8 * p["n"], params={"n": [8]})
    for name in ("one", "two")
]
"""


def test_a_run_measures_exactly_the_pairs_the_variable_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """What a follow-up round's side run gets: flags selecting both cases and both variants, and the
    variable two of the four pairs; it measures those two only."""
    import json

    from fusebench.cases.selection import PAIRS_ENV, pairs_value
    from fusebench.cli import main

    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "pairs.py").write_text(PAIRS_SUITE)
    wanted = [("pairs.one(n=8)", "eager"), ("pairs.two(n=8)", "fusebench-torch")]
    monkeypatch.setenv(PAIRS_ENV, pairs_value(wanted))
    argv = ["run", "--suites", str(tmp_path / "suites"), "-k", "pairs.one(n=8)", "-k", "pairs.two(n=8)"]
    argv += ["--variant", "eager,fusebench-torch", "--device", "cpu", "--repeat-budget", "0.01", "--no-artifacts"]
    assert main([*argv, "--results", str(tmp_path / "results"), "--json", str(tmp_path / "r.json")]) == 0, (
        capsys.readouterr()
    )
    outcomes = json.loads((tmp_path / "r.json").read_text())["outcomes"]
    assert sorted((f"{o['suite']}.{o['case']}(n=8)", o["variant"]) for o in outcomes) == wanted
    monkeypatch.setenv(PAIRS_ENV, "not json")
    assert main([*argv, "--results", str(tmp_path / "results"), "--json", str(tmp_path / "bad.json")]) == 2
    assert PAIRS_ENV in capsys.readouterr().err
