"""Ctrl-C during `fusebench compare` keeps the rounds both sides finished, and says where, or says
that nothing is kept: the interruption is raised inside the rounds (the handler path)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fusebench.cli import main
from fusebench.compare import interleave
from tests.support.git_repos import one_commit_repo


def _outcome(median: float) -> dict:
    samples = [median * (1 + 0.01 * (i % 5)) for i in range(20)]
    return {"suite": "s", "case": "c", "params": {}, "variant": "eager", "status": "ok",
            "timing": {"samples": samples, "median": median}}  # fmt: skip


def _interrupt_after(finished: int, monkeypatch: pytest.MonkeyPatch) -> list:
    calls: list = []

    def fake_run(side: interleave.Side, run_args: list, scratch: Path, round_index: int, report, env) -> object:
        calls.append((side.label, round_index, env))
        if len(calls) > finished:
            raise KeyboardInterrupt
        return interleave.SideRun(side.label, round_index, 0, 0.1, outcomes=[_outcome(1e-3)])

    monkeypatch.setattr(interleave, "run_side", fake_run)
    return calls


def test_the_rounds_both_sides_finished_are_kept_and_the_message_says_where(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    repo = one_commit_repo(tmp_path / "repo")
    calls = _interrupt_after(3, monkeypatch)  # round 1 of both, and A of round 2
    kept = tmp_path / "c.json"
    argv = ["compare", "HEAD", "HEAD", "--device", "cpu", "--quick", "--repo", str(repo), "--json", str(kept)]
    assert main([*argv, "--threads", "2"]) == 130
    err = capsys.readouterr().err
    assert f"fusebench compare: interrupted (the 1 of 6 rounds both sides finished are kept in {kept})" in err
    document = json.loads(kept.read_text())
    assert document["interrupted"] and document["rounds_done"] == 1
    [benchmark] = document["benchmarks"]
    assert len(benchmark["a"]["rounds"]) == len(benchmark["b"]["rounds"]) == 1
    assert all(env == {"OMP_NUM_THREADS": "2", "FUSEBENCH_PRECISION": "0"} for _, _, env in calls)


def test_interrupted_before_any_round_finished_it_says_nothing_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    repo = one_commit_repo(tmp_path / "repo")
    _interrupt_after(1, monkeypatch)  # A of round 1 only
    monkeypatch.chdir(tmp_path)
    assert main(["compare", "HEAD", "HEAD", "--device", "cpu", "--quick", "--repo", str(repo)]) == 130
    err = capsys.readouterr().err
    assert "fusebench compare: interrupted (nothing is kept: no round had finished on both sides)" in err
    assert not list(tmp_path.glob("*.json"))
