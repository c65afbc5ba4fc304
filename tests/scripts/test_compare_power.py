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
