"""`fusebench run --time-limit S`: no measurement starts after S seconds; those measured are
recorded and summarized, the rest are listed as not started, and the run exits 0."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from fusebench.cli import main
from fusebench.commands import run_units
from fusebench.history import read_results
from fusebench.measure.workers import UnitQueue

SUITE = """
import torch

from fusebench.cases import Case


def inputs(params, device, seed):
    return (torch.ones(params["n"], device=device),)


CASES = [
    Case(name=name, fn=lambda x: x * 2, make_inputs=inputs, bytes_moved=lambda p: 8 * p["n"], params={"n": [4]})
    for name in ("first", "second", "third")
]
"""

NOT_STARTED = "not started: the run's time limit"


@pytest.fixture(autouse=True)
def cache_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUSEBENCH_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "fusebench-cache"))


def _run(tmp_path: Path, *flags: str) -> tuple[int, dict[str, dict]]:
    suites = tmp_path / "suites"
    suites.mkdir(exist_ok=True)
    (suites / "timed.py").write_text(textwrap.dedent(SUITE))
    argv = ["run", "--suites", str(suites), "--variant", "eager", "--device", "cpu", "--repeat-budget", "0.01"]
    status = main([*argv, "--results", str(tmp_path / "results"), "--json", str(tmp_path / "r.json"), *flags])
    outcomes = {o["case"]: o for o in json.loads((tmp_path / "r.json").read_text())["outcomes"]}
    return status, outcomes


def test_the_units_measured_before_the_limit_are_kept_and_summarized_and_the_rest_listed_as_not_started(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    checks = iter([False, True, True])  # the limit passes while the first unit is measured
    monkeypatch.setattr(run_units, "past", lambda deadline: deadline is not None and next(checks))
    status, outcomes = _run(tmp_path, "--time-limit", "30")
    out, err = capsys.readouterr()
    assert status == 0, out + err
    assert outcomes["first"]["status"] == "ok"
    for case in ("second", "third"):
        assert outcomes[case]["status"] == "skipped", outcomes[case]
        assert outcomes[case]["detail"] == f"{NOT_STARTED} (30 s, --time-limit) had passed"
    assert "fusebench run: 1 measurements done in" in err
    assert "fusebench run: --time-limit 30 s: 2 measurements not started" in err
    cases = ("first", "second", "third")
    rows = {line.split()[0]: line for line in out.splitlines() if line.split()[:1] and line.split()[0] in cases}
    assert "µs" in rows["first"] and all(NOT_STARTED in rows[case] for case in ("second", "third")), out
    assert "timed   1/1 100%" in out  # the dashboard over what was measured
    frame = read_results(tmp_path / "results")
    assert set(frame.case) == {"first"}  # only what was measured is recorded


@pytest.mark.parametrize("where", [[], ["--isolate"]], ids=["in process", "in workers"])
def test_a_limit_past_before_the_first_unit_starts_none(tmp_path: Path, capsys: pytest.CaptureFixture, where) -> None:
    status, outcomes = _run(tmp_path, "--time-limit", "1e-9", *where)
    err = capsys.readouterr().err
    assert status == 0, err
    assert {case: o["status"] for case, o in outcomes.items()} == dict.fromkeys(("first", "second", "third"), "skipped")
    assert "--time-limit 1e-09 s: 3 measurements not started" in err


def test_the_queue_hands_out_no_unit_once_its_deadline_has_passed() -> None:
    now = [0.0]
    queue = UnitQueue(range(4), lambda unit: unit // 2, deadline=1.0, clock=lambda: now[0])
    assert [queue.take("a"), queue.take("b")] == [0, 2]
    now[0] = 1.0
    assert queue.take("a") is None and queue.take("b") is None
    assert UnitQueue(range(2), lambda unit: unit).take("a") == 0  # no deadline: no limit
