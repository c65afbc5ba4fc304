"""Several workers on one GPU (`fusebench run --jobs`): each compiles while another times, and what
is timed runs in one worker's turn at a time (fusebench.measure.turns)."""

from __future__ import annotations

import contextlib
import itertools
import json
import multiprocessing
import time
from pathlib import Path

import pytest
import torch

from fusebench.cli import main
from fusebench.measure import measure as measure_module
from fusebench.measure.measure import Settings, measure_variant, prepare_case
from fusebench.measure.turns import TURN_ENV, device_turn, turn_file
from fusebench.measure.workers import WORKER_CPUS, devices_from
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

    monkeypatch.setattr(measure_module, "device_turn", turn)

    def make(target):
        def run(x):
            calls.append(holding[0])
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
    assert "2 per GPU, taking turns on it" in err
    assert "[cuda:0#1]" in err and "[cuda:0#2]" in err
    outcomes = json.loads((tmp_path / "r.json").read_text())["outcomes"]
    assert outcomes and all(o["status"] == "ok" for o in outcomes)
    assert all("turn_wait" in o["extra"]["phases"] for o in outcomes)
