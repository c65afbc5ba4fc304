"""Several workers on one GPU (`fusebench run --jobs`): each compiles while another times, and what
is timed runs in one worker's turn at a time (fusebench.measure.turns)."""

from __future__ import annotations

import contextlib
import itertools
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from fusebench.cases.selection import Selection
from fusebench.cli import main
from fusebench.commands import run as run_command
from fusebench.measure import measure as measure_module
from fusebench.measure import workers as workers_module
from fusebench.measure.measure import Settings, measure_variant, prepare_case
from fusebench.measure.turns import TURN_ENV, device_turn, quiet_host, turn_file
from fusebench.measure.workers import WORKER_CPUS, _Live, _Worker, default_jobs, devices_from, is_stopped
from tests.support.fakes import tiny_case, variant_from


def _hold_turns(path: str, log: str, times: int) -> None:
    import os

    os.environ[TURN_ENV] = path
    for _ in range(times):
        with device_turn():
            start = time.monotonic()
            time.sleep(0.02)
            with open(log, "a") as f:
                f.write(f"{start} {time.monotonic()}\n")


def test_two_processes_never_hold_the_turn_at_once(tmp_path: Path) -> None:
    log = tmp_path / "held"
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_hold_turns, args=(turn_file(tmp_path, "0"), str(log), 10)) for _ in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    spans = sorted(tuple(map(float, line.split())) for line in log.read_text().splitlines())
    assert len(spans) == 30
    assert all(end <= next_start for (_, end), (next_start, _) in itertools.pairwise(spans)), spans


def test_without_a_shared_device_there_is_no_turn_to_wait_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TURN_ENV, raising=False)
    waited = []
    with device_turn(contextlib.nullcontext(waited.append(1))):
        pass
    with device_turn():
        pass


def test_jobs_per_gpu_share_its_turn_file_and_split_the_cpus(tmp_path: Path) -> None:
    devices = devices_from("all", cuda_count=2, jobs=3, turns=tmp_path)
    assert [d.label for d in devices] == ["cuda:0#1", "cuda:0#2", "cuda:0#3", "cuda:1#1", "cuda:1#2", "cuda:1#3"]
    assert [d.env["CUDA_VISIBLE_DEVICES"] for d in devices] == ["0"] * 3 + ["1"] * 3
    assert {d.env[TURN_ENV] for d in devices[:3]} == {turn_file(tmp_path, "0")}
    assert devices[0].env[TURN_ENV] != devices[3].env[TURN_ENV]
    shares = [set(d.env[WORKER_CPUS].split(",")) for d in devices if WORKER_CPUS in d.env]
    assert all(a.isdisjoint(b) for i, a in enumerate(shares) for b in shares[i + 1 :])
    (alone,) = devices_from("cuda:0", cuda_count=1)
    assert TURN_ENV not in alone.env
    with pytest.raises(ValueError, match="--jobs 0"):
        devices_from("cuda:0", cuda_count=1, jobs=0, turns=tmp_path)


@pytest.mark.parametrize("cold", [False, True])
def test_what_is_timed_runs_in_the_turn_and_a_warm_first_call_outside_it(
    cold: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    holding: list[bool] = [False]
    calls: list[bool] = []

    @contextlib.contextmanager
    def turn(waiting=None):
        assert not holding[0], "a turn taken twice"
        with waiting:
            holding[0] = True
        try:
            yield
        finally:
            holding[0] = False

    @contextlib.contextmanager
    def quiet():
        assert holding[0], "the others stopped outside the turn"
        quieted[0] = True
        yield [12345]
        quieted[0] = False

    quieted: list[bool] = [False]
    quiet_calls: list[bool] = []
    monkeypatch.setattr(measure_module, "device_turn", turn)
    monkeypatch.setattr(measure_module, "quiet_host", quiet)
    recorded_in_turn: list[bool] = []
    monkeypatch.setattr(measure_module, "_record", lambda compiled, settings: recorded_in_turn.append(holding[0]) or {})

    def make(target):
        def run(x):
            calls.append(holding[0])
            quiet_calls.append(quieted[0])
            return x * 2

        return run

    settings = Settings(device=torch.device("cpu"), budget_s=0.01, min_repeats=3, cold_min_repeats=2)
    case = tiny_case(cold=True, timer="wall") if cold else tiny_case()
    prepared = prepare_case("tiny", case, case.grid(quick=True)[0], settings)
    outcome = measure_variant(prepared, variant_from("v", make), settings)
    assert outcome.status == "ok", outcome.detail
    assert calls[0] is cold  # a warm case compiles out of turn; a cold case's first call is a sample
    assert all(calls[1:]) and len(calls) > 3
    assert "turn_wait" in outcome.extra["phases"]
    # the warm case's timed repeats run with the other workers stopped; a cold case compiles in its samples
    assert any(quiet_calls) is not cold and not quiet_calls[0]
    assert outcome.extra.get("workers_stopped") == (None if cold else 1)
    assert recorded_in_turn == [False]  # the record (nvFuser's segments profiled) leaves the device to the others


_SIBLING = textwrap.dedent(
    """
    import subprocess, sys, time
    from fusebench.measure.turns import join_turns

    def tick(path):
        while True:
            with open(path, "a") as f:
                f.write(".")
            time.sleep(0.005)

    tick_code = "import time\\nwhile True:\\n    open(sys.argv[1], 'a').write('.')\\n    time.sleep(0.005)"
    subprocess.Popen([sys.executable, "-c", "import sys\\n" + tick_code, sys.argv[2]])
    with join_turns():
        tick(sys.argv[1])
    """
)


def _sizes(*paths: Path) -> list[int]:
    return [path.stat().st_size if path.exists() else 0 for path in paths]


def _until(condition, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_the_timed_worker_stops_the_others_and_what_they_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    turn = turn_file(tmp_path, "0")
    monkeypatch.setenv(TURN_ENV, turn)
    own, child = tmp_path / "own", tmp_path / "child"
    sibling = subprocess.Popen(
        [sys.executable, "-c", _SIBLING, str(own), str(child)],
        env={**os.environ, TURN_ENV: turn},
        start_new_session=True,  # as a worker that shares its GPU is started
    )
    try:
        _until(lambda: all(_sizes(own, child)) and Path(turn + ".workers", str(sibling.pid)).exists())
        with device_turn(), quiet_host() as stopped:
            assert stopped == [sibling.pid]
            time.sleep(0.1)
            assert is_stopped(sibling.pid)
            stopped_at = _sizes(own, child)
            time.sleep(0.3)
            assert _sizes(own, child) == stopped_at  # neither the worker nor its child ran
        _until(lambda: all(now > then for now, then in zip(_sizes(own, child), stopped_at)))
        assert not is_stopped(sibling.pid)
    finally:
        os.killpg(sibling.pid, signal.SIGKILL)
        sibling.wait()


def _bare_worker(process: subprocess.Popen, own_group: bool = True) -> _Worker:
    worker = _Worker.__new__(_Worker)
    worker.process, worker.answers, worker.own_group = process, process.stdout, own_group
    return worker


def test_a_units_time_limit_leaves_out_the_time_its_worker_was_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workers_module, "POLL_S", 0.05)
    answer_after = "import time; time.sleep({}); print('{{}}', flush=True)"
    late = subprocess.Popen([sys.executable, "-c", answer_after.format(5)], stdout=subprocess.PIPE, text=True)
    try:
        assert not _bare_worker(late)._answers_within(0.3)  # running, it takes too long
    finally:
        late.kill()
        late.wait()
    stopped = subprocess.Popen([sys.executable, "-c", answer_after.format(0.3)], stdout=subprocess.PIPE, text=True)
    stopped.send_signal(signal.SIGSTOP)
    threading.Timer(2.0, stopped.send_signal, (signal.SIGCONT,)).start()
    try:
        # 2 s stopped, then well under 1.5 s of its own time to answer
        assert _bare_worker(stopped)._answers_within(1.5)
    finally:
        stopped.kill()
        stopped.wait()


def test_workers_left_stopped_are_continued() -> None:
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        os.killpg(process.pid, signal.SIGSTOP)
        _until(lambda: is_stopped(process.pid))
        live = _Live()
        live.add(_bare_worker(process))
        live.continue_all()
        _until(lambda: not is_stopped(process.pid))
    finally:
        process.kill()
        process.wait()


def test_default_jobs_follow_the_cpus_and_the_gpu_memory() -> None:
    gib = 1 << 30
    assert default_jobs(cpus=16, gpus=1, device_bytes=141 * gib) == 4  # an H200 host
    assert default_jobs(cpus=64, gpus=1, device_bytes=80 * gib) == 4  # at most 4
    assert default_jobs(cpus=32, gpus=2, device_bytes=80 * gib) == 4  # the CPUs shared by both GPUs' workers
    assert default_jobs(cpus=16, gpus=2, device_bytes=80 * gib) == 2
    assert default_jobs(cpus=8, gpus=1, device_bytes=24 * gib) == 1  # a 24 GiB card holds one
    assert default_jobs(cpus=2, gpus=1, device_bytes=80 * gib) == 1


@pytest.mark.parametrize(
    ("flags", "posix", "expected"),
    [({}, True, 4), ({"isolate": False}, True, 1), ({}, False, 1), ({"jobs": 2}, True, 2)],
)
def test_a_gpu_run_gets_the_default_workers_where_they_can_take_turns(
    flags: dict, posix: bool, expected: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: SimpleNamespace(total_memory=80 << 30))
    monkeypatch.setattr(run_command, "available_cpus", lambda: list(range(16)))
    monkeypatch.setattr(run_command, "turns_supported", lambda: posix)
    args = SimpleNamespace(**{"jobs": None, "isolate": None, "worker": False, "devices": None, **flags})
    assert run_command._jobs(args, Selection(quick=False, device=torch.device("cuda"))) == expected


def test_jobs_on_cpu_are_refused_with_the_flag_to_use(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    argv = ["run", "--suite", "host_overhead", "--device", "cpu", "--results", str(tmp_path), "--jobs", "2"]
    assert main(argv) == 2
    assert "--jobs 2: expected at least 1 worker per GPU (on CPU: 1; use --devices cpu,cpu)" in capsys.readouterr().err


@pytest.mark.gpu
def test_two_workers_share_the_gpu_taking_turns(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA: torch.cuda.is_available() is False")
    argv = ["run", "--suite", "llm_norms", "--device", "cuda", "--variant", "eager,fusebench", "--jobs", "2"]
    argv += [
        "--results",
        str(tmp_path),
        "--repeat-budget",
        "0.05",
        "--no-artifacts",
        "--json",
        str(tmp_path / "r.json"),
    ]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "2 per GPU (--jobs), taking turns on it" in err
    assert "[cuda:0#1]" in err and "[cuda:0#2]" in err
    outcomes = json.loads((tmp_path / "r.json").read_text())["outcomes"]
    assert outcomes and all(o["status"] == "ok" for o in outcomes)
    assert all("turn_wait" in o["extra"]["phases"] for o in outcomes)
