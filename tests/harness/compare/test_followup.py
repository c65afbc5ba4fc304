"""Follow-up rounds in `fusebench compare`, end to end with a fake `fusebench run`: the rows left
noisy by the planned rounds, and only those, get more interleaved rounds; the table and the JSON
say how many rounds each row got; Ctrl-C during a follow-up keeps what was measured."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from fusebench.cli import main
from fusebench.compare import interleave


def _repo(path: Path) -> Path:
    path.mkdir()
    subprocess.run(["git", "-C", str(path), "init", "-q"], check=True)
    (path / "README").write_text("x\n")
    subprocess.run(["git", "-C", str(path), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@x.invalid", "commit", "-qm", "one"],
        check=True,
    )
    return path


# NOTE: (B / A, drift of a round's time between processes) per case: `steady` is decided by the
# planned rounds; `wobbly`, slower by half at B, drifts so much between rounds that 6 leave it noisy.
CASES = {"steady": (1.0, 0.005), "wobbly": (1.5, 0.3)}


def _outcome(case: str, side: str, round_index: int) -> dict:
    effect, drift = CASES[case]
    rng = np.random.default_rng([ord(side), round_index, len(case)])
    center = 1e-3 * (effect if side == "B" else 1.0) * rng.lognormal(0, drift)
    samples = list(center * rng.lognormal(0, 0.02, 40))
    return {"suite": "s", "case": case, "params": {"n": 4}, "variant": "eager", "status": "ok",
            "timing": {"samples": samples, "median": float(np.median(samples))}}  # fmt: skip


def _fake_runs(monkeypatch: pytest.MonkeyPatch, interrupt_at: int | None = None) -> list:
    calls: list = []

    def fake_run(side: interleave.Side, run_args: list, scratch: Path, round_index: int, report, env) -> object:
        calls.append((side.label, round_index, list(run_args)))
        if interrupt_at is not None and len(calls) > interrupt_at:
            raise KeyboardInterrupt
        patterns = [run_args[i + 1] for i, arg in enumerate(run_args) if arg == "-k"]
        cases = [c for c in CASES if not patterns or f"s.{c}(n=4)" in patterns]
        return interleave.SideRun(side.label, round_index, 0, 0.1, outcomes=[_outcome(c, side.label, round_index) for c in cases])

    monkeypatch.setattr(interleave, "run_side", fake_run)
    return calls


def test_only_the_noisy_row_gets_follow_up_rounds_and_is_then_decided(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    repo = _repo(tmp_path / "repo")
    calls = _fake_runs(monkeypatch)
    out = tmp_path / "c.json"
    argv = ["compare", "HEAD", "HEAD", "--device", "cpu", "--quick", "--repo", str(repo), "--json", str(out)]
    assert main(argv) == 1
    captured = capsys.readouterr()
    document = json.loads(out.read_text())
    rows = {b["case"]: b for b in document["benchmarks"]}
    print(captured.err[-3000:])
    print(captured.out)
    assert rows["steady"]["rounds"] == 6 and rows["steady"]["follow_up_rounds"] == 0
    assert rows["wobbly"]["follow_up_rounds"] > 0 and rows["wobbly"]["verdict"] == "slower"
