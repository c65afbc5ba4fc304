"""Durations of earlier runs (fusebench/history/durations.py) and the ETA they give the progress lines."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from fusebench.cli import main
from fusebench.history.durations import FILE_NAME, Durations, keep_durations, load_durations, unit_key
from fusebench.measure.outcome import Outcome
from fusebench.report.progress import Progress
from tests.support.fakes import FakeClock


def _outcome(variant: str, duration: float) -> Outcome:
    return Outcome("s", "c", {"n": 1}, variant, "cuda:1", "ok", duration=duration)


def test_durations_merge_into_the_file_and_a_crash_is_left_out(tmp_path: Path) -> None:
    path = tmp_path / "m" / FILE_NAME
    keep_durations(path, [("a", _outcome("eager", 2.0)), ("b", _outcome("fusebench", 30.0))])
    keep_durations(path, [("b", _outcome("fusebench", 20.0)), ("c", _outcome("peer", 0.0))])  # c crashed
    assert load_durations(path) == {"a": 2.0, "b": 20.0}
    path.write_text("{not json")
    assert load_durations(path) == {} and load_durations(tmp_path / "missing") == {}
    assert unit_key("s.c(n=1)", "eager", "cuda:1", quick=False) == unit_key("s.c(n=1)", "eager", "cuda", False)
    assert unit_key("s.c(n=1)", "eager", "cpu", quick=True) != unit_key("s.c(n=1)", "eager", "cpu", quick=False)


def test_a_run_notes_what_it_measured_even_when_interrupted(tmp_path: Path) -> None:
    durations = Durations(tmp_path / FILE_NAME, ["u0", "u1", "u2"])
    seen: list[int] = []
    done = durations.watching(lambda index, outcome: seen.append(index))
    done(0, _outcome("eager", 1.5))
    done(2, _outcome("fusebench", 9.0))
    durations.keep()
    assert seen == [0, 2] and load_durations(tmp_path / FILE_NAME) == {"u0": 1.5, "u2": 9.0}
    assert Durations(tmp_path / FILE_NAME, ["u0", "u1", "u2"]).expected([2, 1, 0]) == [9.0, None, 1.5]


def test_the_eta_is_the_time_the_measurements_left_took_before_at_todays_pace() -> None:
    clock, stream = FakeClock(), io.StringIO()
    # a quick eager row first, then compilations: the pace of the first row would promise 4 s
    progress = Progress(5, stream, clock, expected=[1.0, 30.0, 1.0, 40.0, None])  # the unknown one: the mean, 18
    progress.start("s.c(n=1)", "eager")
    clock.advance(2.0)  # today twice as slow as before
    progress.finish(_outcome("eager", 2.0))
    assert stream.getvalue().endswith("| 2.00 s | ETA 2 min 58 s\n")  # (30 + 1 + 40 + 18) * 2
    progress.start("s.c(n=1)", "fusebench")
    clock.advance(60.0)
    progress.finish(_outcome("fusebench", 60.0), position=3)  # out of order, as workers finish
    assert stream.getvalue().endswith("| ETA 1 min 14 s\n")  # (30 + 1 + 18) * 62 / 41


@pytest.mark.parametrize("expected", [None, [None, None]])
def test_without_earlier_durations_the_eta_is_the_pace_so_far(expected: list | None) -> None:
    clock, stream = FakeClock(), io.StringIO()
    progress = Progress(2, stream, clock, expected=expected)
    progress.start("s.c(n=1)", "eager")
    clock.advance(7.0)
    progress.finish(_outcome("eager", 7.0))
    assert stream.getvalue().endswith("| ETA 7 s\n")


SUITE = """
import torch
from fusebench.cases import Case

CASES = [
    Case(
        name="double",
        fn=lambda x: x * 2,
        make_inputs=lambda params, device, seed: (torch.ones(params["n"], device=device),),
        bytes_moved=lambda params: 8 * params["n"],
        params={"n": [64, 128]},
    )
]
"""


def test_fusebench_run_keeps_each_measurements_duration(tmp_path: Path) -> None:
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "tiny.py").write_text(SUITE)
    command = ["run", "--suites", str(tmp_path / "suites"), "--device", "cpu", "--quick", "--repeat-budget", "0.01"]
    command += ["--all", "--variant", "eager", "--results", str(tmp_path / "results"), "--machine", "m"]
    assert main(command) == 0
    kept = json.loads((tmp_path / "results" / "m" / FILE_NAME).read_text())["durations"]
    assert sorted(kept) == ["tiny.double(n=128) | eager | cpu quick", "tiny.double(n=64) | eager | cpu quick"]
    assert all(seconds > 0 for seconds in kept.values())
