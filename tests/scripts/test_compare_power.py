"""scripts/compare_power.py without measuring: the history it builds and its table of verdicts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from scripts.compare_power import build_history, decide_again, render


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


@pytest.mark.slow
def test_b_grows_the_work_and_adds_two_muls_per_tensor_add(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    base, changed = build_history(repo, [1.5], extra_prims=2, numel=64, replicas=2)
    assert "'grow_150': 20" in _git(repo, "show", f"{base}:suites/power_study.py")
    assert "'grow_150': 30" in _git(repo, "show", f"{changed}:suites/power_study.py")
    probe = (
        "import torch, compiler\n"
        "from suites.power_study import CASES, adds\n"
        "x = torch.ones(4); jitted = compiler.jit(adds); jitted(x, x)\n"
        "print(sorted(c.name for c in CASES)); print(str(compiler.last_traces(jitted)[-1]).count('prims.mul('))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(repo)}
    for commit, muls in ((base, "0"), (changed, "20")):
        _git(repo, "checkout", "-q", commit)
        out = subprocess.run([sys.executable, "-c", probe], cwd=repo, env=env, capture_output=True, text=True)
        names, count = out.stdout.splitlines()
        assert count == muls, out.stderr
    assert names == str(sorted(f"{n}_r{r}" for n in ("adds", "grow_150", "steady") for r in range(2)))


def test_the_table_counts_verdicts_per_effect_from_the_kept_samples(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)

    def side(center: float) -> dict:
        rounds = [list(center * rng.lognormal(0, 0.02, 50)) for _ in range(6)]
        return {"rounds": rounds, "round_medians": [float(np.median(r)) for r in rounds]}

    def document(slow: float) -> dict:
        entries = [("steady_r0", 1.0), ("grow_150_r0", slow)]
        benchmarks = [
            {"case": case, "variant": "eager", "verdict": "?", "a": side(1.0), "b": side(factor)}
            for case, factor in entries
        ]
        return {"settings": {"min_effect": 0.05, "alpha": 0.01}, "benchmarks": benchmarks}

    for index in range(2):
        (tmp_path / f"AA-{index}.json").write_text(json.dumps(document(1.0)))
        (tmp_path / f"AB-{index}.json").write_text(json.dumps(document(1.5)))
    table = render(decide_again(tmp_path, 0.25), [1.5], 0)
    rows = {tuple(line.split()[:3]): line.split() for line in table.splitlines()[1:] if line.startswith("A/")}
    assert rows[("A/B", "grow_150", "eager")][-7:] == ["2", "0", "0", "0", "0", "6.0,", "6"]
    assert rows[("A/A", "grow_150", "eager")][-7:] == ["0", "0", "0", "2", "0", "6.0,", "6"]
    assert "A/A comparisons that flagged nothing: 2 of 2" in table
    assert "unchanged rows flagged in A/B comparisons: 0 of 2" in table


def test_extra_prims_slow_only_the_variant_that_runs_each_prim() -> None:
    from scripts.compare_power import _effect

    assert _effect("A/B", "adds", "fusebench-torch", 2) == "+2 mul/add"
    assert _effect("A/B", "adds", "fusebench", 2) == "+2 mul/add, fused"  # Inductor/nvFuser fuse them
    assert _effect("A/B", "adds", "eager", 2) == "none"
    assert _effect("A/B", "adds", "fusebench-torch", 0) == "none"
    assert _effect("A/A", "adds", "fusebench-torch", 2) == "none"


def test_the_table_columns_line_up_with_long_variant_names() -> None:
    rows = [
        {"case": "adds_r0", "variant": v, "verdict": "no change", "noisy_machine": False}
        for v in ("eager", "fusebench-torch")
    ]
    table = render({"A/A": [rows], "A/B": [rows]}, [1.5], 2).splitlines()
    header, lines = table[0], [line for line in table[1:5] if line.startswith(("A/A", "A/B"))]
    start = header.index("slower")
    assert lines and all(line[start - 2 : start] == "  " and line[start:].split()[0] == "0" for line in lines)


def test_decided_again_a_row_with_follow_ups_counts_its_rounds_and_uses_its_looks_alpha(tmp_path: Path) -> None:
    from fusebench.compare.decide import DecisionSettings, decide
    from fusebench.compare.looks import LookSchedule

    rng = np.random.default_rng(5)

    def side(center: float, rounds: int) -> dict:
        samples = [list(center * rng.lognormal(0, 0.1) * rng.lognormal(0, 0.05, 40)) for _ in range(rounds)]
        return {"rounds": samples, "round_medians": [float(np.median(r)) for r in samples], "look": int(rounds > 6)}

    followed = {"case": "grow_150_r0", "variant": "eager", "verdict": "?", "a": side(1.0, 12), "b": side(1.08, 12)}
    planned = {"case": "steady_r0", "variant": "eager", "verdict": "?", "a": side(1.0, 6), "b": side(1.0, 6)}
    document = {"rounds": 6, "max_rounds": 24, "settings": {"min_effect": 0.05, "alpha": 0.01}}
    (tmp_path / "AB-0.json").write_text(json.dumps({**document, "benchmarks": [followed, planned]}))
    [rows] = decide_again(tmp_path, 0.25)["A/B"]
    schedule = LookSchedule(6, 24, 0.01)
    expected = decide(followed["a"]["rounds"], followed["b"]["rounds"], DecisionSettings(alpha=schedule.alpha_at(1)))
    assert [(row["rounds"], row["verdict"]) for row in rows] == [(12, expected.verdict), (6, rows[1]["verdict"])]
    table = render({"A/A": [], "A/B": [rows]}, [1.5], 0)
    assert "12.0, 12" in table and "6.0, 6" in table


FAKE_COMPARE = """
import json, signal, sys, time
def stop(*_):
    json.dump({"benchmarks": [], "interrupted": True}, open(sys.argv[1], "w"))
    sys.exit(130)
signal.signal(signal.SIGINT, stop)
for r in (1, 2):
    for side in ("A", "B"):
        print(f"fusebench compare: round {r}/6: {side} done in 2.0 s: 3 measurements", file=sys.stderr, flush=True)
for side in ("A", "B"):
    print(f"fusebench compare: follow-up round 7/12: {side} done in 0.5 s: 1 measurements", file=sys.stderr)
time.sleep(60)
"""


def test_a_comparison_reports_its_pace_and_is_interrupted_when_the_budget_runs_out(tmp_path: Path) -> None:
    from scripts.power_progress import StudyClock, run_comparison

    log = (tmp_path / "study.log").open("w")
    clock = StudyClock(comparisons=2, rounds=6, budget=1.0, log=log)
    output = tmp_path / "c.json"
    command = [sys.executable, "-c", FAKE_COMPARE, str(output)]
    result = run_comparison(command, dict(os.environ), clock, "A/B 1 of 1")
    log.close()
    assert result.interrupted and result.returncode == 130 and json.loads(output.read_text())["interrupted"]
    text = (tmp_path / "study.log").read_text()
    assert "round 2/6: B done in 2.0 s" in text  # forwarded as it came
    # after round 2 of 6: 8 planned runs left in this comparison and 12 in the next, 2 s each
    assert "power study: A/B 1 of 1 round 2/6 done at " in text and "ETA 40 s for the planned rounds left" in text
    assert clock.side_runs == [2.0] * 4 and clock.follow_up_runs == [0.5] * 2 and not clock.can_start_another()
    assert (
        "follow-up round 7/12 done at " in text and "ETA 40 s for the planned rounds left (follow-ups of noisy" in text
    )
    assert "1 s spent on follow-ups so far" in text


def test_the_study_starts_no_comparison_that_its_pace_says_would_not_fit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    import scripts.compare_power as power

    started: list[str] = []

    def fake_compare(repo, a, b, selection, output, clock, label):
        started.append(label)
        clock.side_runs += [30.0] * 12  # one comparison: 6 rounds, 2 runs each, 30 s a run...
        clock.started -= 360  # ...which took 6 minutes
        entry = {"case": "steady_r0", "variant": "eager", "verdict": "no change", "rounds": 6, "noisy_machine": False}
        return [entry], False

    monkeypatch.setattr(power, "compare", fake_compare)
    monkeypatch.setattr(power, "build_history", lambda *args: ("a" * 40, "b" * 40))
    log = tmp_path / "study.log"
    argv = ["--kinds", "AB", "--tries", "3", "--effects", "1.05", "--extra-prims", "0", "--variants", "eager"]
    assert power.main([*argv, "--replicas", "20", "--budget", "400", "--log", str(log), "--keep", str(tmp_path)]) == 0
    assert started == ["A/B 1 of 3"]  # a second needs 12 runs of 30 s: more than the budget left
    out, err = capsys.readouterr()
    plan = "power study: 3 comparison(s) (AB x 3) on cpu, 6 planned rounds each (2 runs of `fusebench run` per round)"
    assert plan in err and "40 measurements per run (2 cases x 20 replicas x 1 variants" in err
    assert "no time left in --budget 400 for another comparison" in err
    assert "1 comparisons in" in out and "A/B     steady" in out
    assert log.read_text().splitlines()[0].startswith(plan) and "1 comparisons in" in log.read_text()


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        (["--budget", "5"], "--budget 5: expected seconds from 10 to 604800"),
        (["--numel", "0"], "--numel 0: expected 1 to 2147483647 elements"),
        (["--replicas", "101"], "--replicas 101: expected 1 to 100"),
        (["--tries", "0"], "--tries 0: expected 1 to 1000"),
        (["--kinds", "AC"], "--kinds AC: expected AA, AB or AA,AB"),
    ],
)
def test_bad_flags_get_one_line_and_exit_2(flag: list[str], message: str, capsys: pytest.CaptureFixture) -> None:
    from scripts.compare_power import main

    assert main(flag) == 2
    assert capsys.readouterr().err == f"compare_power: {message}\n"
