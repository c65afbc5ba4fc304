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
        return interleave.SideRun(
            side.label, round_index, 0, 0.1, outcomes=[_outcome(c, side.label, round_index) for c in cases]
        )

    monkeypatch.setattr(interleave, "run_side", fake_run)
    return calls


def _argv(repo: Path, *more: str) -> list[str]:
    return ["compare", "HEAD", "HEAD", "--device", "cpu", "--quick", "--repo", str(repo), *more]


def test_only_the_noisy_row_gets_follow_up_rounds_and_is_then_decided(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    repo = _repo(tmp_path / "repo")
    calls = _fake_runs(monkeypatch)
    out = tmp_path / "c.json"
    assert main(_argv(repo, "--json", str(out))) == 1
    captured = capsys.readouterr()
    document = json.loads(out.read_text())
    rows = {b["case"]: b for b in document["benchmarks"]}
    assert rows["steady"]["rounds"] == 6 and rows["steady"]["follow_up_rounds"] == 0
    assert rows["steady"]["verdict"] == "no change"
    wobbly = rows["wobbly"]
    assert wobbly["verdict"] == "slower" and wobbly["follow_up_rounds"] == wobbly["rounds"] - 6 > 0
    assert document["looks"] == [6, 12, 24] and sum(document["look_alphas"]) == pytest.approx(0.01)
    # the planned rounds measure everything; the follow-ups only the noisy row, rounds still alternating
    planned, follow_ups = calls[:12], calls[12:]
    assert all("-k" not in args for _, _, args in planned)
    assert follow_ups and all(args[args.index("-k") + 1] == "s.wobbly(n=4)" for _, _, args in follow_ups)
    assert all(args[args.index("--variant") + 1] == "eager" for _, _, args in follow_ups)
    assert [label for label, _, _ in follow_ups[:4]] == ["A", "B", "B", "A"]
    assert "follow-up 1 of at most 2: 1 noisy row(s) get rounds 7 to 12 (of at most 24): wobbly(n=4) eager" in (
        captured.err
    )
    assert "follow-up round 7/12: A = HEAD" in captured.err
    table = {line.split()[0]: line for line in captured.out.splitlines() if line.startswith(("steady", "wobbly"))}
    assert f"after {wobbly['rounds']} rounds ({wobbly['follow_up_rounds']} follow-up)" in table["wobbly"]
    assert "follow-up" not in table["steady"]


def test_max_rounds_equal_to_rounds_turns_follow_ups_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    repo = _repo(tmp_path / "repo")
    calls = _fake_runs(monkeypatch)
    out = tmp_path / "c.json"
    assert main(_argv(repo, "--max-rounds", "6", "--json", str(out))) == 0
    rows = {b["case"]: b for b in json.loads(out.read_text())["benchmarks"]}
    assert len(calls) == 12 and rows["wobbly"]["verdict"] == "noisy" and rows["wobbly"]["rounds"] == 6
    assert "--max-rounds" in capsys.readouterr().out  # the noisy row's advice names the flag that decides it


def test_ctrl_c_during_the_follow_ups_keeps_the_planned_and_follow_up_rounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    repo = _repo(tmp_path / "repo")
    _fake_runs(monkeypatch, interrupt_at=12 + 5)  # the planned rounds, then 2 follow-up rounds and A of a third
    kept = tmp_path / "c.json"
    assert main(_argv(repo, "--json", str(kept))) == 130
    err = capsys.readouterr().err
    message = f"the 6 of 6 rounds and 2 follow-up round(s) of the noisy rows both sides finished are kept in {kept}"
    assert f"fusebench compare: interrupted ({message})" in err
    document = json.loads(kept.read_text())
    assert document["interrupted"] and document["rounds_done"] == 6 and document["follow_up_rounds_done"] == 2
    rows = {b["case"]: b for b in document["benchmarks"]}
    assert rows["wobbly"]["rounds"] == 8 and rows["wobbly"]["follow_up_rounds"] == 2
    assert rows["steady"]["rounds"] == 6
