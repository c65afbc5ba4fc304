"""Follow-up rounds in `fusebench compare`, end to end with a fake `fusebench run`: the rows left
noisy by the planned rounds, and only those, get more interleaved rounds; the table and the JSON
say how many rounds each row got; Ctrl-C during a follow-up keeps what was measured."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fusebench.cases.selection import PAIRS_ENV, pairs_from_environment
from fusebench.cli import main
from fusebench.compare import interleave
from tests.support.git_repos import one_commit_repo

# NOTE: (B / A, drift of a round's time between processes) per (case, variant): the steady ones
# are decided by the planned rounds; `wobbly` eager and `shaky` torch, slower by half at B, drift so
# much between rounds that 6 leave them noisy.
CASES = {
    ("steady", "eager"): (1.0, 0.005),
    ("wobbly", "eager"): (1.5, 0.4),
    ("wobbly", "torch"): (1.0, 0.005),
    ("shaky", "eager"): (1.0, 0.005),
    ("shaky", "torch"): (1.5, 0.4),
}
NOISY = [("wobbly", "eager"), ("shaky", "torch")]


def _outcome(case: str, variant: str, side: str, round_index: int) -> dict:
    effect, drift = CASES[(case, variant)]
    rng = np.random.default_rng([ord(side), round_index, len(case), len(variant)])
    center = 1e-3 * (effect if side == "B" else 1.0) * rng.lognormal(0, drift)
    samples = list(center * rng.lognormal(0, 0.02, 40))
    return {"suite": "s", "case": case, "params": {"n": 4}, "variant": variant, "status": "ok",
            "timing": {"samples": samples, "median": float(np.median(samples))}}  # fmt: skip


def _flags(run_args: list, flag: str) -> list:
    return [run_args[i + 1] for i, arg in enumerate(run_args) if arg == flag]


def _fake_runs(monkeypatch: pytest.MonkeyPatch, interrupt_at: int | None = None, old: bool = False) -> list:
    """`fusebench run` honouring -k, --variant and the pairs variable as `fusebench.cases.selection.plan`
    does (with `old`, ignoring the variable as a revision from before it would)."""
    calls: list = []

    def fake_run(side: interleave.Side, run_args: list, scratch: Path, round_index: int, report, env) -> object:
        calls.append((side.label, round_index, list(run_args), dict(env or {})))
        if interrupt_at is not None and len(calls) > interrupt_at:
            raise KeyboardInterrupt
        patterns, variants = _flags(run_args, "-k"), _flags(run_args, "--variant")
        exact = None if old else pairs_from_environment(env or {})
        pairs = [
            (case, variant)
            for case, variant in CASES
            if (not patterns or f"s.{case}(n=4)" in patterns) and (not variants or variant in variants)
            if exact is None or (f"s.{case}(n=4)", variant) in exact
        ]
        outcomes = [_outcome(case, variant, side.label, round_index) for case, variant in pairs]
        return interleave.SideRun(side.label, round_index, 0, 0.1, outcomes=outcomes)

    monkeypatch.setattr(interleave, "run_side", fake_run)
    return calls


def _argv(repo: Path, *more: str) -> list[str]:
    return ["compare", "HEAD", "HEAD", "--device", "cpu", "--quick", "--repo", str(repo), *more]


def test_only_the_noisy_rows_get_follow_up_rounds_and_are_then_decided(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    repo = one_commit_repo(tmp_path / "repo")
    calls = _fake_runs(monkeypatch)
    out = tmp_path / "c.json"
    assert main(_argv(repo, "--json", str(out))) == 1
    captured = capsys.readouterr()
    document = json.loads(out.read_text())
    rows = {(b["case"], b["variant"]): b for b in document["benchmarks"]}
    for pair, row in rows.items():
        if pair in NOISY:
            assert row["verdict"] == "slower" and row["follow_up_rounds"] == row["rounds"] - 6 > 0, pair
        else:
            assert row["verdict"] == "no change" and (row["rounds"], row["follow_up_rounds"]) == (6, 0), pair
    assert document["looks"] == [6, 12, 24] and sum(document["look_alphas"]) == pytest.approx(0.01)
    # the planned rounds measure everything; each follow-up round one run per side, its flags
    # selecting the noisy rows' cases and variants and the pairs variable exactly those rows, rounds
    # still alternating which side goes first
    planned, follow_ups = calls[:12], calls[12:]
    assert all("-k" not in args and PAIRS_ENV not in env for _, _, args, env in planned)
    first_batch = [call for call in follow_ups if call[1] < 12]
    assert [(label, index) for label, index, _, _ in first_batch[:4]] == [("A", 6), ("B", 6), ("B", 7), ("A", 7)]
    assert len(first_batch) == 12  # 6 rounds, one run per side each
    for _, _, args, env in first_batch:
        assert sorted(_flags(args, "-k")) == ["s.shaky(n=4)", "s.wobbly(n=4)"]
        assert sorted(_flags(args, "--variant")) == ["eager", "torch"]
        assert pairs_from_environment(env) == {("s.wobbly(n=4)", "eager"), ("s.shaky(n=4)", "torch")}
    assert "follow-up 1 of at most 2: 2 noisy row(s) get rounds 7 to 12 (of at most 24): " in captured.err
    assert "follow-up round 7/12: A = HEAD" in captured.err
    [first_look] = [line for line in captured.err.splitlines() if line.startswith("fusebench compare: follow-up 1: ")]
    assert sorted(first_look.split(": ")[-1].split(", ")) == ["1 noisy", "1 slower"], first_look
    assert "fusebench compare: follow-up 2: 1 slower" in captured.err
    table = {tuple(line.split()[:3:2]): line for line in captured.out.splitlines() if line.startswith(("s", "w"))}
    wobbly = rows[("wobbly", "eager")]
    assert f"after {wobbly['rounds']} rounds ({wobbly['follow_up_rounds']} follow-up)" in table[("wobbly", "eager")]
    assert "follow-up" not in table[("steady", "eager")] and "follow-up" not in table[("wobbly", "torch")]


def test_max_rounds_equal_to_rounds_turns_follow_ups_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    repo = one_commit_repo(tmp_path / "repo")
    calls = _fake_runs(monkeypatch)
    out = tmp_path / "c.json"
    assert main(_argv(repo, "--max-rounds", "6", "--json", str(out))) == 0
    rows = {(b["case"], b["variant"]): b for b in json.loads(out.read_text())["benchmarks"]}
    assert len(calls) == 12 and all(rows[pair]["verdict"] == "noisy" and rows[pair]["rounds"] == 6 for pair in NOISY)
    assert "--max-rounds" in capsys.readouterr().out  # the noisy rows' advice names the flag that decides them


def test_ctrl_c_during_the_follow_ups_keeps_the_planned_and_follow_up_rounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    repo = one_commit_repo(tmp_path / "repo")
    # the planned rounds (12 runs), 2 follow-up rounds (one run per side each), then a third's first run
    _fake_runs(monkeypatch, interrupt_at=12 + 4 + 1)
    kept = tmp_path / "c.json"
    assert main(_argv(repo, "--json", str(kept))) == 130
    err = capsys.readouterr().err
    message = f"the 6 of 6 rounds and 2 follow-up round(s) of the noisy rows both sides finished are kept in {kept}"
    assert f"fusebench compare: interrupted ({message})" in err
    document = json.loads(kept.read_text())
    assert document["interrupted"] and document["rounds_done"] == 6 and document["follow_up_rounds_done"] == 2
    rows = {(b["case"], b["variant"]): b for b in document["benchmarks"]}
    assert all((rows[pair]["rounds"], rows[pair]["follow_up_rounds"]) == (8, 2) for pair in NOISY)
    assert rows[("steady", "eager")]["rounds"] == 6


def test_a_side_from_before_the_pairs_variable_measures_more_and_only_the_asked_pairs_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = one_commit_repo(tmp_path / "repo")
    _fake_runs(monkeypatch, old=True)
    out = tmp_path / "c.json"
    assert main(_argv(repo, "--json", str(out))) == 1
    rows = {(b["case"], b["variant"]): b for b in json.loads(out.read_text())["benchmarks"]}
    assert all(rows[pair]["follow_up_rounds"] > 0 for pair in NOISY)
    assert all(row["follow_up_rounds"] == 0 for pair, row in rows.items() if pair not in NOISY)


def test_a_follow_up_selection_matches_exactly_the_rows_ids_even_with_glob_characters() -> None:
    from fusebench.cases.selection import Selection, _id_matches
    from fusebench.compare.comparison import BenchmarkComparison, SideSummary
    from fusebench.compare.followup import follow_up_selection

    def row(case: str, params: dict, variant: str) -> BenchmarkComparison:
        return BenchmarkComparison("s", case, params, variant, SideSummary(), SideSummary(), "noisy")

    rows = [row("c", {"pattern": "a*[b]?"}, "eager"), row("d", {"n": 4}, "eager")]
    narrowed = follow_up_selection(Selection(suites=("s", "t"), patterns=("x",), quick=False), rows)
    assert narrowed.suites == ("s",) and narrowed.variants == ("eager",) and not narrowed.quick
    assert _id_matches(narrowed.patterns, "s.c(pattern=a*[b]?)") and _id_matches(narrowed.patterns, "s.d(n=4)")
    assert not _id_matches(narrowed.patterns, "s.c(pattern=axxbq)") and not _id_matches(narrowed.patterns, "s.e(n=4)")


def test_a_run_that_writes_no_result_does_not_read_the_one_an_earlier_run_of_its_round_left(tmp_path: Path) -> None:
    """A follow-up round runs several `fusebench run`s per side on one result path: one that fails
    must not be credited with the previous one's outcomes (their rows would count a round twice)."""
    (tmp_path / "A-round7.json").write_text(json.dumps({"outcomes": [_outcome("wobbly", "eager", "A", 7)]}))
    side = interleave.Side("A", "a", "a" * 40, tmp_path)
    run = interleave.run_side(side, ["--no-such-flag"], tmp_path, 7, lambda line: None)
    assert run.error and not run.outcomes
