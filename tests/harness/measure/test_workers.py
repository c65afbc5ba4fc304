"""`fusebench run --isolate` and `--devices`: crashes cost one unit, several workers feed one history.

The suite below has a case whose function aborts or segfaults the process measuring it; each
test runs in worker processes (each imports torch: a few seconds each on a 2-core VM).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from fusebench.cases.discovery import Suite
from fusebench.cases.selection import Group
from fusebench.cli import main
from fusebench.commands.run_workers import crashed_outcome
from fusebench.history import read_results
from fusebench.history.results import RunInfo, write_outcomes
from fusebench.history.revision import Revision
from fusebench.measure.machine import machine_info
from fusebench.measure.outcome import Outcome
from fusebench.measure.stats import summarize
from fusebench.measure.workers import WORKER_CPUS, Crash, UnitQueue, available_cpus, cpu_shares, devices_from
from fusebench.report.report import build_report, load_inputs
from fusebench.report.scoreboard import rows_from_frame
from tests.support.fakes import tiny_case, variant_from

CRASHING_SUITE = """
import os
import signal
import time

import torch

from fusebench.cases import Case


def double(x):
    return x * 2


def abort(x):
    if x.device.type == "cpu" and os.environ.get("FUSEBENCH_WORKER_TEST") == "crash":
        os.abort()
    return x * 2


def segfault(x):
    if os.environ.get("FUSEBENCH_WORKER_TEST") == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    return x * 2


def hang(x):
    if os.environ.get("FUSEBENCH_WORKER_TEST") == "hang":
        if os.environ.get("FUSEBENCH_WORKER_MARK"):
            with open(os.environ["FUSEBENCH_WORKER_MARK"], "w") as mark:
                mark.write(str(os.getpid()))
        time.sleep(600)
    return x * 2


def inputs(params, device, seed):
    return (torch.ones(params["n"], device=device),)


CASES = [
    Case(name=name, fn=fn, make_inputs=inputs, bytes_moved=lambda p: 8 * p["n"], params={"n": [4]})
    for name, fn in (("before", double), ("aborts", abort), ("segfaults", segfault), ("hangs", hang), ("after", double))
]
"""


@pytest.fixture(autouse=True)
def cache_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUSEBENCH_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "fusebench-cache"))


def _suite(tmp_path: Path) -> Path:
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "crashy.py").write_text(textwrap.dedent(CRASHING_SUITE))
    return suites


def test_a_crash_marks_its_unit_crashed_and_the_run_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FUSEBENCH_WORKER_TEST", "crash")
    results = tmp_path / "results"
    argv = ["run", "--suites", str(_suite(tmp_path)), "--variant", "eager", "--device", "cpu", "--isolate"]
    status = main([*argv, "--repeat-budget", "0.01", "--results", str(results), "--json", str(tmp_path / "r.json")])
    out, err = capsys.readouterr()
    assert status == 1, out + err
    outcomes = {o["case"]: o for o in json.loads((tmp_path / "r.json").read_text())["outcomes"]}
    assert {case: o["status"] for case, o in outcomes.items()} == {
        "before": "ok", "aborts": "crashed", "segfaults": "crashed", "hangs": "ok", "after": "ok",
    }  # fmt: skip
    assert outcomes["aborts"]["detail"].startswith("killed by SIGABRT")
    assert outcomes["segfaults"]["detail"].startswith("killed by SIGSEGV")
    assert "crashed: killed by SIGSEGV" in out
    frame = read_results(results)
    times = frame[frame.metric == "time_call"].set_index("case")
    assert times.loc["before", "status"] == "ok" and times.loc["after", "status"] == "ok"
    assert times.loc["aborts", "status"] == "crashed"
    (segfaults,) = [row for row in rows_from_frame(frame) if row.case == "segfaults"]
    assert segfaults.cells["eager"].status == "crashed"
    page = build_report(load_inputs(results, None))
    assert "killed by SIGSEGV" in page and "purple: failed, errored or crashed" in page


def test_a_unit_past_the_time_limit_is_stopped_and_a_fresh_worker_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FUSEBENCH_WORKER_TEST", "hang")
    argv = ["run", "--suites", str(_suite(tmp_path)), "--variant", "eager", "--device", "cpu", "--isolate"]
    argv += ["--unit-timeout", "8", "--repeat-budget", "0.01", "--results", str(tmp_path / "results")]
    started = time.monotonic()
    status = main([*argv, "--json", str(tmp_path / "r.json")])
    out, err = capsys.readouterr()
    assert status == 1, out + err
    assert time.monotonic() - started < 300  # the hanging unit sleeps 600 s
    outcomes = {o["case"]: o for o in json.loads((tmp_path / "r.json").read_text())["outcomes"]}
    assert {case: o["status"] for case, o in outcomes.items()} == {
        "before": "ok", "aborts": "ok", "segfaults": "ok", "hangs": "crashed", "after": "ok",
    }  # fmt: skip
    assert outcomes["hangs"]["detail"].startswith("stopped after 8 s (the unit time limit, --unit-timeout)")
    assert outcomes["hangs"]["extra"] == {"time_limit_s": 8} and outcomes["before"]["extra"].get("time_limit_s") is None


# The tgkill system call's number (a signal to one thread of another process), where it is known.
_TGKILL = {"x86_64": 234, "aarch64": 131}.get(os.uname().machine) if sys.platform == "linux" else None


def _interrupt(pid: int, thread: str) -> None:
    """Ctrl-C for process `pid`: as the kernel hands it to the process (any of its threads may
    take it), or to one of its threads other than the main one."""
    if thread == "process":
        os.kill(pid, signal.SIGINT)
        return
    import ctypes

    others = [int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid]
    assert others, "the run has no thread besides its main one"
    assert ctypes.CDLL(None, use_errno=True).syscall(_TGKILL, pid, others[-1], signal.SIGINT) == 0


@pytest.mark.parametrize(
    "thread",
    [
        "process",
        pytest.param(
            "another thread", marks=pytest.mark.skipif(_TGKILL is None, reason="needs Linux tgkill (x86_64, aarch64)")
        ),
    ],
)
def test_an_interrupted_run_kills_its_workers_and_records_no_crash(tmp_path: Path, thread: str) -> None:
    mark, results = tmp_path / "worker.pid", tmp_path / "results"
    argv = [sys.executable, "-m", "fusebench", "run", "--suites", str(_suite(tmp_path)), "-k", "hangs"]
    argv += ["--variant", "eager", "--device", "cpu", "--isolate", "--results", str(results)]
    env = {**os.environ, "FUSEBENCH_WORKER_TEST": "hang", "FUSEBENCH_WORKER_MARK": str(mark)}
    # NOTE: SIGINT at its default disposition in the run, as in a terminal: a shell that starts a job
    # in the background without job control (`cmd &` in a script) starts it with SIGINT ignored
    restore = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)
    run = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=restore)
    try:
        deadline = time.monotonic() + 240
        while not (mark.exists() and mark.read_text()):
            assert time.monotonic() < deadline and run.poll() is None, "the worker never reached the hanging unit"
            time.sleep(0.1)
        worker = int(mark.read_text())
        _interrupt(run.pid, thread)  # Ctrl-C reaches the run; its workers hear of it from the run
        assert run.wait(timeout=60) != 0
    finally:
        run.kill()
    deadline = time.monotonic() + 30
    while _alive(worker):
        assert time.monotonic() < deadline, f"worker {worker} outlived its interrupted run"
        time.sleep(0.1)
    recorded = read_results(results) if results.exists() else None
    assert recorded is None or "crashed" not in set(recorded.status)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").exists() and Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"


def test_two_cpu_workers_share_the_units_and_merge_into_one_history(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    results = tmp_path / "results"
    argv = ["run", "--suites", str(_suite(tmp_path)), "--variant", "eager", "--devices", "cpu,cpu"]
    status = main([*argv, "--repeat-budget", "0.01", "--results", str(results)])
    out, err = capsys.readouterr()
    assert status == 0, out + err
    assert "[cpu#0]" in err and "[cpu#1]" in err, err
    files = list(results.glob("*/*.json"))
    assert len([f for f in files if f.name != "machine.json"]) == 1
    frame = read_results(results)
    times = frame[frame.metric == "time_call"]
    assert sorted(times.case) == ["aborts", "after", "before", "hangs", "segfaults"]
    assert (times.status == "ok").all() and times.value.notna().all()
    assert "1/5" in err and "5/5" in err


LOGGING_SUITE = """
import os

import torch

from fusebench.cases import Case, Compiled, Variant


def inputs(params, device, seed):
    with open(os.environ["FUSEBENCH_PREPARE_LOG"], "a") as log:
        cpus = ",".join(str(cpu) for cpu in sorted(os.sched_getaffinity(0)))
        log.write(f"{params['n']} {os.getpid()} {cpus}\\n")
    return (torch.ones(params["n"], device=device),)


VARIANTS = tuple(Variant(name, lambda target: Compiled(target.fn)) for name in ("a", "b", "c"))
CASES = [
    Case(name="double", fn=lambda x: x * 2, make_inputs=inputs, bytes_moved=lambda p: 8 * p["n"], params={"n": [4, 8]},
         extra_variants=VARIANTS)
]
"""


def test_two_workers_start_on_different_cases_and_keep_to_them(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 2 parameter sets x 3 variants over 2 workers: each worker starts on its own set (one FIFO
    # queue gave both workers the first set's first units, so both made its inputs)
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "logged.py").write_text(textwrap.dedent(LOGGING_SUITE))
    log = tmp_path / "prepared.txt"
    monkeypatch.setenv("FUSEBENCH_PREPARE_LOG", str(log))
    argv = ["run", "--suites", str(suites), "--variant", "a,b,c", "--devices", "cpu,cpu", "--repeat-budget", "0.01"]
    status = main([*argv, "--results", str(tmp_path / "results")])
    out, err = capsys.readouterr()
    assert status == 0, out + err
    prepared = [line.split()[:2] for line in log.read_text().splitlines()]  # (n, worker pid), in order
    first = {}
    for n, pid in prepared:
        first.setdefault(pid, n)
    assert sorted(first.values()) == ["4", "8"], prepared
    assert len({tuple(p) for p in prepared}) == len(prepared) <= 3, prepared  # no worker made the same inputs twice
    # each worker kept to its own CPUs (where the machine has one for each)
    cpus_of = {pid: cpus for _, pid, cpus in (line.split() for line in log.read_text().splitlines())}
    if len(available_cpus()) >= 2:
        shares = [set(cpus.split(",")) for cpus in cpus_of.values()]
        assert len(shares) == 2 and not shares[0] & shares[1], cpus_of


def test_cpu_shares_are_disjoint_contiguous_and_even() -> None:
    assert cpu_shares(2, [0, 1, 2, 3, 4]) == [(0, 1, 2), (3, 4)]
    assert cpu_shares(3, list(range(9))) == [(0, 1, 2), (3, 4, 5), (6, 7, 8)]
    assert cpu_shares(1, [5, 7]) == [(5, 7)]
    assert cpu_shares(3, [0, 1]) == [(), (), ()]  # fewer CPUs than workers: nobody is pinned


def test_several_gpu_workers_get_their_own_cpus_and_inductor_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("fusebench.measure.workers.available_cpus", lambda: list(range(64)))
    monkeypatch.delenv("TORCHINDUCTOR_COMPILE_THREADS", raising=False)
    devices = devices_from("all", cuda_count=4)
    assert [d.env[WORKER_CPUS] for d in devices][1] == ",".join(str(c) for c in range(16, 32))
    assert {d.env["TORCHINDUCTOR_COMPILE_THREADS"] for d in devices} == {"16"}
    (single,) = devices_from("cuda:1", cuda_count=4)
    assert WORKER_CPUS not in single.env  # one worker keeps the whole machine


def test_bad_devices_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    argv = ["run", "--suites", str(_suite(tmp_path)), "--device", "cpu", "--results", str(tmp_path)]
    assert main([*argv, "--devices", "tpu:0"]) == 2
    assert "--devices: 'tpu:0' is not 'cpu' or 'cuda:N'" in capsys.readouterr().err


def test_a_gpu_named_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="cuda:1 is named twice: for several workers on one GPU, use --jobs"):
        devices_from("cuda:0,cuda:1,cuda:1", cuda_count=2)
    assert [d.label for d in devices_from("cpu,cpu", cuda_count=0)] == ["cpu#0", "cpu#1"]
    with pytest.raises(ValueError, match="--devices all: no GPU is visible here"):
        devices_from("all", cuda_count=0)
    assert [d.env["CUDA_VISIBLE_DEVICES"] for d in devices_from("all", cuda_count=2)] == ["0", "1"]


def test_recording_a_crash_keeps_the_other_variants_of_its_benchmark(tmp_path: Path) -> None:
    case = tiny_case(version="2")
    group = Group(Suite("s", "s.py", (case,)), case, {"n": 8}, ())
    run = RunInfo(machine_info("m"), Revision("a" * 40, 1_700_000_000_000, False), "env")
    timed = Outcome("s", case.name, {"n": 8}, "eager", "cpu", "ok", timing=summarize([1e-6, 2e-6]), case_version="2")
    write_outcomes(tmp_path, run, [timed])
    crashed = crashed_outcome(
        group, variant_from("fusebench", lambda target: target.fn), "cpu", Crash("killed by SIGSEGV")
    )
    write_outcomes(tmp_path, run, [crashed])
    frame = read_results(tmp_path)
    times = frame[frame.metric == "time_call"].set_index("variant")
    assert sorted(times.index) == ["eager", "fusebench"]
    assert times.loc["eager", "value"] == pytest.approx(1.5e-6) and times.loc["fusebench", "status"] == "crashed"


def test_the_queue_keeps_each_worker_on_its_group_of_units() -> None:
    # units 0-2 are one case and parameters, 3-5 another, 6 a third: inputs are prepared once per worker and group
    queue = UnitQueue(range(7), lambda unit: unit // 3)
    assert [queue.take("a"), queue.take("b")] == [0, 3]  # b starts the group nobody is on
    assert [queue.take("a"), queue.take("b"), queue.take("b")] == [1, 4, 5]
    assert queue.take("b") == 6  # its group is done: the next group nobody is on
    assert queue.take("b") == 2  # only a's group is left: b joins it
    assert queue.take("a") is None and queue.take("b") is None


def test_a_restarted_worker_takes_a_group_nobody_is_on() -> None:
    queue = UnitQueue(range(6), lambda unit: unit // 2)
    assert [queue.take("a"), queue.take("b")] == [0, 2]
    queue.restart("a")  # its process died: group 0 is free again, and a fresh process prepares anew
    assert queue.take("c") == 1
    assert queue.take("a") == 4


def test_units_paired_with_their_group_stay_with_the_worker_on_it() -> None:
    # per group: eager, torch.compile, fusebench (paired: together), fusebench-torch (not paired)
    queue = UnitQueue(range(8), lambda unit: unit // 4, together=lambda unit: unit % 4 != 3)
    assert [queue.take("a"), queue.take("b")] == [0, 4]
    assert [queue.take("b"), queue.take("b"), queue.take("b")] == [5, 6, 7]
    assert queue.take("b") == 3  # a's group: only its unpaired unit may go to another worker
    assert queue.take("b") is None  # the rest are paired with what a measured: a measures them
    assert [queue.take("a"), queue.take("a"), queue.take("a")] == [1, 2, None]


def test_workers_pair_fusebench_with_the_peers_of_its_group(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    # two parameter sets of a case, eager and fusebench each, over two CPU workers: every
    # fusebench outcome comes back with its pairs against eager, taken in the worker that measured both
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "pairs.py").write_text(PAIRS_SUITE)
    argv = ["run", "--suites", str(suites), "--variant", "eager,fusebench", "--devices", "cpu,cpu"]
    json_path = tmp_path / "run.json"
    status = main([*argv, "--repeat-budget", "0.01", "--results", str(tmp_path / "results"), "--json", str(json_path)])
    out, err = capsys.readouterr()
    assert status == 0, out + err
    outcomes = json.loads(json_path.read_text())["outcomes"]
    ours = [o for o in outcomes if o["variant"] == "fusebench"]
    assert len(ours) == 2 and all(o["extra"]["paired"]["eager"]["pairs"] >= 5 for o in ours), ours
    assert out.count("; timed alternately ") == 2 and "2 of the ratios from samples timed alternately" in out


PAIRS_SUITE = """
import torch

from fusebench.cases import Case

CASES = [
    Case(name="scale", fn=lambda x: x * 2 + 1, make_inputs=lambda p, d, s: (torch.ones(p["n"], device=d),),
         bytes_moved=lambda p: 8 * p["n"], params={"n": [4, 8]})
]
"""
