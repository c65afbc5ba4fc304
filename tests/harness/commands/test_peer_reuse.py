"""`fusebench run` reuses a peer's earlier measurement on the same machine, where nothing it depends
on changed and its case's eager time (measured every run) has not drifted; `--remeasure-peers`, a
changed suite file, or a drifted eager measure it again (fusebench.history.peer_cache)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fusebench.cases import Case
from fusebench.cases.discovery import Suite
from fusebench.cases.selection import Group
from fusebench.cases.variants import EAGER, Compiled, Variant
from fusebench.cli import main
from fusebench.commands import peer_reuse
from fusebench.commands.peer_reuse import measure_reusing_peers
from fusebench.history.peer_cache import DRIFT, FILE_NAME, HISTORY, PeerCache, drifted
from fusebench.history.results import RunInfo
from fusebench.history.revision import Revision
from fusebench.measure.machine import machine_info
from fusebench.measure.outcome import Outcome
from fusebench.measure.stats import TimingStats

SUITE = """
import os
from pathlib import Path

import torch

from fusebench.cases import Case, Compiled, Variant


def _prepare_peer(target):
    with Path(os.environ["PEER_PREPARED"]).open("a") as log:
        log.write("prepared\\n")
    return Compiled(target.fn)


CASES = [
    Case(
        name="double",
        fn=lambda x: x * 2,
        make_inputs=lambda params, device, seed: (torch.ones(params["n"], device=device),),
        bytes_moved=lambda params: 8 * params["n"],
        params={"n": [64]},
        extra_variants=(Variant("peer", _prepare_peer, reusable=True),),
    )
]
"""


def _run(tmp_path: Path, *flags: str) -> int:
    command = ["run", "--suites", str(tmp_path / "suites"), "--device", "cpu", "--quick", "--repeat-budget", "0.01"]
    command += ["--variant", "eager,peer", "--results", str(tmp_path / "results"), "--machine", "m", *flags]
    assert main(command) == 0
    return len((tmp_path / "prepared").read_text().splitlines())


def test_a_peer_is_reused_until_its_suite_changes_or_remeasuring_is_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "tiny.py").write_text(SUITE)
    (tmp_path / "prepared").write_text("")
    monkeypatch.setenv("PEER_PREPARED", str(tmp_path / "prepared"))
    monkeypatch.setattr("fusebench.commands.peer_reuse.drifted", lambda *times: False)  # a quiet machine
    assert _run(tmp_path, "--commit", "a" * 40) == 1
    assert (tmp_path / "results" / "m" / FILE_NAME).exists()
    capsys.readouterr()
    assert _run(tmp_path, "--commit", "b" * 40) == 1  # reused, not prepared again
    assert "1 peer measurements reused" in capsys.readouterr().err
    recorded = json.loads(next((tmp_path / "results" / "m").glob("bbbbbbbb-*.json")).read_text())
    assert any(name.endswith(".time_call") and "peer" in json.dumps(row) for name, row in recorded["results"].items())
    assert _run(tmp_path, "--commit", "c" * 40, "--remeasure-peers") == 2
    (tmp_path / "suites" / "tiny.py").write_text(SUITE + "\n# the suite changed\n")
    assert _run(tmp_path, "--commit", "d" * 40) == 3


def _outcome(variant: str, median: float) -> Outcome:
    timing = TimingStats(median=median, q25=median, q75=median, min=median, max=median, repeats=1, samples=(median,))
    return Outcome("s", "c", {"n": 1}, variant, "cpu", "ok", timing=timing)


def _peer_group(names: tuple[str, ...] = ("a", "b")) -> tuple[list, RunInfo]:
    """Units (eager, then a reusable peer) of one case per name, and a run to record them in."""
    peer = Variant("peer", lambda target: Compiled(target.fn), reusable=True)
    cases = [
        Case(name=n, fn=lambda x: x, make_inputs=lambda p, d, s: (), bytes_moved=lambda p: 0, params={"n": [1]})
        for n in names
    ]
    groups = [Group(Suite("s", "s.py", (case,)), case, {"n": 1}, (EAGER, peer)) for case in cases]
    units = [(group, variant) for group in groups for variant in (EAGER, peer)]
    return units, RunInfo(machine_info("m"), Revision("e" * 40, 0, dirty=False), "env")


def _measuring(units: list, measured: list[list[int]]) -> object:
    """`measure(eager_median)`: a stand-in for measuring units that logs the indices it is given into
    `measured` and times eager (unit 0) at `eager_median`, the peer at 3.0."""

    def measure(eager_median: float) -> object:
        def run_units(indices: list[int], done: object) -> dict[int, Outcome]:
            measured.append(indices)
            return {i: _outcome(units[i][1].name, eager_median if i == 0 else 3.0) for i in indices}

        return run_units

    return measure


def test_a_reused_peer_is_measured_again_when_its_cases_eager_time_moved(tmp_path: Path) -> None:
    units, run = _peer_group(("c",))
    group = units[0][0]
    cache = PeerCache(tmp_path / FILE_NAME, "key")
    cache.remember(group.case_id, _outcome("peer", 2.0), "d" * 40, _outcome("eager", 1.0))
    measured: list[list[int]] = []
    measure = _measuring(units, measured)

    kept = measure_reusing_peers(units, run, cache, measure(1.05), tmp_path / "results")
    assert measured == [[0]] and kept[1].timing.median == 2.0  # eager within 10%: the kept peer stands
    measured.clear()
    kept = measure_reusing_peers(units, run, cache, measure(1.5), tmp_path / "results")
    assert measured == [[0], [1]] and kept[1].timing.median == 3.0  # eager moved 50%: measured again
    assert drifted(None, 1.0) and drifted(1.0, None) and not drifted(1.0, 1.09) and drifted(1.0, 1.11)


def test_a_case_whose_eager_time_swings_between_runs_keeps_its_peers_within_that_swing(tmp_path: Path) -> None:
    units, run = _peer_group(("c",))
    case_id = units[0][0].case_id
    cache = PeerCache(tmp_path / FILE_NAME, "key")
    cache.remember(case_id, _outcome("peer", 2.0), "d" * 40, _outcome("eager", 10.0))
    assert cache.tolerance(case_id) == DRIFT  # no history yet
    measured: list[list[int]] = []
    measure = _measuring(units, measured)

    for eager in (10.0, 13.6, 8.1, 13.8):  # a host-bound case's eager medians, run after run
        cache.remember(case_id, _outcome("peer", 2.0), "d" * 40, _outcome("eager", 10.0))
        measure_reusing_peers(units, run, cache, measure(eager), tmp_path / "results")
    assert 0.3 < cache.tolerance(case_id) < 2.0
    measured.clear()
    kept = measure_reusing_peers(units, run, cache, measure(13.0), tmp_path / "results")
    assert measured == [[0]] and kept[1].timing.median == 2.0  # 30% off, as the case always swings: kept
    kept = measure_reusing_peers(units, run, cache, measure(40.0), tmp_path / "results")
    assert measured[-1] == [1] and kept[1].timing.median == 3.0  # four times slower: measured again
    reloaded = PeerCache(tmp_path / FILE_NAME, "key")
    assert reloaded.eager_history[case_id] == cache.eager_history[case_id] and len(reloaded.eager_history[case_id]) == 6


def test_a_steady_case_keeps_the_ten_percent_tolerance() -> None:
    cache = PeerCache(Path("/nonexistent") / FILE_NAME, "key")
    for value in (1.0, 1.01, 0.99, 1.0, 1.02, 1.0, 0.98, 1.0, 1.01, 1.0):
        cache.note_eager("steady", value)
    assert cache.tolerance("steady") == DRIFT and len(cache.eager_history["steady"]) == HISTORY


def test_a_peers_error_is_reused_and_its_crash_measured_again(tmp_path: Path) -> None:
    cache = PeerCache(tmp_path / FILE_NAME, "key")
    eager = _outcome("eager", 1.0)
    for status in ("error", "crashed"):
        outcome = Outcome("s", "c", {"n": 1}, f"peer-{status}", "cpu", status, detail="thunder raised")
        cache.remember("s.c(n=1)", outcome, "d" * 40, eager)
    assert cache.reusable("s.c(n=1)", "peer-error").detail == "thunder raised"
    assert cache.reusable("s.c(n=1)", "peer-crashed") is None
    cache.save()
    assert PeerCache(tmp_path / FILE_NAME, "key").reusable("s.c(n=1)", "peer-error") is not None
    stale = PeerCache(tmp_path / FILE_NAME, "another machine or code")
    assert stale.stale and stale.reusable("s.c(n=1)", "peer-error") is None


def test_a_peer_past_the_time_limit_is_reused_under_a_limit_no_longer(tmp_path: Path) -> None:
    cache = PeerCache(tmp_path / FILE_NAME, "key")
    detail = "stopped after 120 s (the unit time limit, --unit-timeout)"
    slow = Outcome("s", "c", {"n": 1}, "peer", "cpu", "crashed", detail=detail, extra={"time_limit_s": 120.0})
    cache.remember("s.c(n=1)", slow, "d" * 40, _outcome("eager", 1.0))
    cache.save()
    kept = PeerCache(tmp_path / FILE_NAME, "key")
    assert kept.reusable("s.c(n=1)", "peer", unit_timeout_s=120.0).detail == detail
    assert kept.reusable("s.c(n=1)", "peer", unit_timeout_s=60.0).status == "crashed"
    assert kept.reusable("s.c(n=1)", "peer", unit_timeout_s=300.0) is None  # it may finish within a longer limit
    assert kept.reusable("s.c(n=1)", "peer", unit_timeout_s=None) is None  # no limit now


def test_a_run_reuses_a_peer_past_the_limit_without_measuring_it(tmp_path: Path) -> None:
    units, run = _peer_group(("c",))
    cache = PeerCache(tmp_path / FILE_NAME, "key")
    measured: list[list[int]] = []

    def measure(indices: list[int], done: object) -> dict[int, Outcome]:
        measured.append(indices)
        slow = Outcome("s", "c", {"n": 1}, "peer", "cpu", "crashed", detail="stopped", extra={"time_limit_s": 120.0})
        return {i: _outcome("eager", 1.0) if i == 0 else slow for i in indices}

    first = measure_reusing_peers(units, run, cache, measure, tmp_path / "results", unit_timeout_s=120.0)
    second = measure_reusing_peers(units, run, cache, measure, tmp_path / "results", unit_timeout_s=120.0)
    assert measured == [[0, 1], [0]] and first[1].status == second[1].status == "crashed"
    assert second[1].extra["reused"]["commit"] == "e" * 40
    measure_reusing_peers(units, run, cache, measure, tmp_path / "results", unit_timeout_s=600.0)
    assert measured[-1] == [0, 1]  # a longer limit measures it again


def test_an_interrupted_run_keeps_the_peers_it_measured(tmp_path: Path) -> None:
    units, run = _peer_group()

    def interrupted(indices: list[int], done) -> dict[int, Outcome]:
        for index in indices[:2]:  # case a's eager and peer, then Ctrl-C
            done(index, _outcome(units[index][1].name, 1.0 if index == 0 else 2.0))
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        measure_reusing_peers(units, run, PeerCache(tmp_path / FILE_NAME, "key"), interrupted, tmp_path / "results")
    kept = PeerCache(tmp_path / FILE_NAME, "key")
    assert kept.reusable("s.a(n=1)", "peer").timing.median == 2.0 and kept.eager_median("s.a(n=1)", "peer") == 1.0
    assert kept.reusable("s.b(n=1)", "peer") is None


def test_peers_are_written_as_they_finish_not_only_at_the_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peer_reuse, "SAVE_EVERY_S", 0.0)
    units, run = _peer_group()
    on_disk: list[bool] = []

    def measure(indices: list[int], done) -> dict[int, Outcome]:
        outcomes = {}
        for index in indices:
            outcomes[index] = _outcome(units[index][1].name, 1.0)
            done(index, outcomes[index])
            on_disk.append(PeerCache(tmp_path / FILE_NAME, "key").reusable("s.a(n=1)", "peer") is not None)
        return outcomes  # a run killed (SIGKILL) after case a's peer would have it in the file

    measure_reusing_peers(units, run, PeerCache(tmp_path / FILE_NAME, "key"), measure, tmp_path / "results")
    assert on_disk == [False, True, True, True]


def test_a_reused_peer_brings_no_pairs_from_its_own_run(tmp_path: Path) -> None:
    """Paired samples (fusebench.measure.paired) are with the fusebench of the run that took them."""
    cache = PeerCache(tmp_path / FILE_NAME, "key")
    peer = _outcome("thunder", 2.0)
    peer.extra["paired"] = {"fusebench": {"ratio": 2.0, "spread": 0.01, "pairs": 20}}
    cache.remember("s.c(n=1)", peer, "d" * 40, _outcome("eager", 1.0))
    cache.save()
    reused = PeerCache(tmp_path / FILE_NAME, "key").reusable("s.c(n=1)", "thunder")
    assert reused is not None and "paired" not in reused.extra and reused.extra["reused"]["commit"] == "d" * 40
    (entry,) = cache.entries.values()  # a cache written before pairs were left out of it
    entry["outcome"]["extra"]["paired"] = {"fusebench": {"ratio": 2.0, "spread": 0.01, "pairs": 20}}
    assert "paired" not in cache.reusable("s.c(n=1)", "thunder").extra
