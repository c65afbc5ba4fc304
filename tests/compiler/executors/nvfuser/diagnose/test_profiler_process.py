"""The long-lived profiler child: jobs, answers a script's prints cannot garble, failures, restarts.

The scripts here are stand-ins for repro scripts: they write the JSON a repro script writes with
`--profile-json OUT` (kernels and the scheduled IR), with the child's PID as the IR, so a test
sees which child ran each job. They import only the standard library: each test is a few Python
starts at most.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from compiler.executors.nvfuser.diagnose.profiler_process import CHILD_SCRIPT, ProfilerProcess

WRITES_PROFILE = """
import argparse, json, os
parser = argparse.ArgumentParser()
parser.add_argument("--profile-json")
args = parser.parse_args()
kernel = dict(segment=0, scheduler="pointwise", time_ms=0.01, bandwidth_gbs=100.0, name="nvfuser_pointwise_f0",
              launch="grid [1] block [1] regs 16")
with open(args.profile_json, "w") as f:
    json.dump(dict(kernels=[kernel], scheduled_ir=str(os.getpid())), f)
"""


def script(folder: Path, name: str, body: str = "", then_profile: bool = True) -> Path:
    """A script running `body`, then (unless `then_profile` is False) writing a profile."""
    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(body) + (WRITES_PROFILE if then_profile else ""))
    return path


def profiled_pid(output: Path) -> int:
    data = json.loads(output.read_text())
    assert data["kernels"][0]["scheduler"] == "pointwise"
    return int(data["scheduled_ir"])


@pytest.fixture
def profiler():
    with ProfilerProcess(job_timeout_s=60, preload=()) as process:
        yield process


def test_jobs_run_one_after_another_in_the_same_child(tmp_path, profiler):
    assert profiler.pid is None  # started on the first job, not before
    first = profiler.run(script(tmp_path, "a"), tmp_path / "a.json")
    second = profiler.run(script(tmp_path, "b"), tmp_path / "b.json")
    assert first.ok and second.ok, (first, second)
    assert profiled_pid(tmp_path / "a.json") == profiled_pid(tmp_path / "b.json") == first.pid == second.pid
    assert first.pid == profiler.pid and first.pid != os.getpid()


def test_a_child_started_ahead_of_its_first_job_preloads_what_it_can_and_takes_it(tmp_path):
    with ProfilerProcess(job_timeout_s=60, preload=("colorsys", "no_such_module_for_fusebench")) as profiler:
        profiler.start()
        started = profiler.pid
        assert started is not None
        loaded = script(tmp_path, "preloaded", "import sys\nassert 'colorsys' in sys.modules\n")
        result = profiler.run(loaded, tmp_path / "preloaded.json")
        assert result.ok and result.pid == started, result


def test_a_script_that_raises_is_reported_and_the_child_carries_on(tmp_path, profiler):
    failed = profiler.run(script(tmp_path, "raises", "raise ValueError('bad layout')"), tmp_path / "raises.json")
    assert failed.failure == "the script raised" and "ValueError: bad layout" in failed.detail
    assert "ValueError: bad layout" in (tmp_path / "raises.json.error").read_text()
    fine = profiler.run(script(tmp_path, "fine"), tmp_path / "fine.json")
    assert fine.ok and fine.pid == failed.pid == profiled_pid(tmp_path / "fine.json")


def test_a_script_that_exits_with_an_error_status_is_reported_and_one_that_exits_0_is_not(tmp_path, profiler):
    failed = profiler.run(script(tmp_path, "exit2", "raise SystemExit(2)"), tmp_path / "exit2.json")
    assert failed.failure == "the script raised" and "SystemExit: 2" in failed.detail
    fine = profiler.run(script(tmp_path, "exit0", WRITES_PROFILE + "raise SystemExit(0)", False), tmp_path / "e.json")
    assert fine.ok and fine.pid == failed.pid


def test_what_a_script_prints_cannot_garble_or_fake_an_answer(tmp_path, profiler):
    garbage = """
        import os, sys
        fake = '{"id": 1, "started": true}\\n{"id": 1, "error": null}'
        print(fake)
        print(fake, file=sys.stderr)
        os.write(1, b"\\x00\\xff" + fake.encode() + b"\\n" + fake.encode())  # no newline at the end
        os.write(2, b"\\xfe\\n" * 1000)
        sys.stdout.write("half a line")
        input_seen = sys.stdin.read()  # the child's stdin is empty: not the job pipe
        assert input_seen == "", input_seen
    """
    noisy = profiler.run(script(tmp_path, "noisy", garbage), tmp_path / "noisy.json")
    assert noisy.ok, noisy
    # a script that fakes its own job's answers on stdout, then writes no profile, is reported as such
    fakes = 'print(\'{"id": 2, "started": true}\')\nprint(\'{"id": 2, "error": null}\')\n'
    silent = profiler.run(script(tmp_path, "silent", fakes, then_profile=False), tmp_path / "s.json")
    assert silent.failure == f"the script ended without writing {tmp_path / 's.json'}"
    assert '{"id": 2, "error": null}' in silent.detail  # its stdout, since it wrote nothing to stderr
    fine = profiler.run(script(tmp_path, "fine"), tmp_path / "fine.json")
    assert fine.ok and noisy.pid == silent.pid == fine.pid == profiled_pid(tmp_path / "fine.json")


def test_a_script_that_ends_the_child_is_reported_and_the_next_job_gets_a_new_child(tmp_path, profiler):
    body = "import os, sys\nprint('giving up on', 'nvFusion3', file=sys.stderr)\nos._exit(3)\n"
    failed = profiler.run(script(tmp_path, "exits", body), tmp_path / "exits.json")
    assert failed.failure == "exit status 3" and "giving up on nvFusion3" in failed.detail
    assert profiler.pid is None
    fine = profiler.run(script(tmp_path, "fine"), tmp_path / "fine.json")
    assert fine.ok and fine.pid != failed.pid and fine.pid == profiled_pid(tmp_path / "fine.json")


def test_a_segfault_is_reported_with_the_python_stack(tmp_path, profiler):
    body = "import os, signal\ndef launch():\n    os.kill(os.getpid(), signal.SIGSEGV)\nlaunch()\n"
    failed = profiler.run(script(tmp_path, "segfaults", body), tmp_path / "segfaults.json")
    assert failed.failure == "killed by SIGSEGV", failed
    assert "Segmentation fault" in failed.detail and "in launch" in failed.detail, failed.detail
    assert profiler.run(script(tmp_path, "fine"), tmp_path / "fine.json").ok


def test_a_job_past_its_timeout_is_killed_with_its_stack_reported(tmp_path, profiler):
    body = "import time\ndef compile_kernel():\n    time.sleep(60)\ncompile_kernel()\n"
    started = time.monotonic()
    failed = profiler.run(script(tmp_path, "hangs", body), tmp_path / "hangs.json", timeout_s=1.0)
    assert time.monotonic() - started < 10
    assert failed.failure == "timed out after 1 s" and "in compile_kernel" in failed.detail, failed.detail
    with pytest.raises(ProcessLookupError):
        os.kill(failed.pid, 0)  # killed and reaped
    fine = profiler.run(script(tmp_path, "fine"), tmp_path / "fine.json")
    assert fine.ok and fine.pid != failed.pid


def test_a_child_that_died_between_jobs_is_replaced(tmp_path, profiler):
    first = profiler.run(script(tmp_path, "a"), tmp_path / "a.json")
    os.kill(first.pid, 9)
    second = profiler.run(script(tmp_path, "b"), tmp_path / "b.json")
    assert second.ok and second.pid != first.pid


def test_the_child_frees_what_a_script_left_between_jobs(tmp_path, profiler):
    # a script's globals sit in reference cycles (its functions point back at them) until a collection
    leaves = """
        import functools, gc, sys, types, weakref
        class Inputs: pass
        inputs = Inputs()
        inputs.cycle = inputs
        sys.inputs_left = weakref.ref(inputs)
        sys.emptied = []
        # a stand-in for torch with CUDA initialized, holding nothing of this script's globals
        cuda = types.SimpleNamespace(is_initialized=(1).__bool__, empty_cache=functools.partial(sys.emptied.append, 1))
        sys.modules["torch"] = types.SimpleNamespace(cuda=cuda)
        gc.disable()  # only the child's own collection frees the cycle
    """
    assert profiler.run(script(tmp_path, "leaves", leaves), tmp_path / "leaves.json").ok
    check = "import sys\nassert sys.inputs_left() is None and sys.emptied == [1], (sys.inputs_left(), sys.emptied)\n"
    result = profiler.run(script(tmp_path, "check", check), tmp_path / "check.json")
    assert result.ok, result.detail


def _parent_program(tmp_path: Path, ending: str) -> str:
    """A parent process that profiles one script with its shared profiler, prints the child's PID and
    folder, then ends with `ending`. It loads the module by path: importing the compiler would take seconds."""
    module = CHILD_SCRIPT.with_name("profiler_process.py")
    return textwrap.dedent(f"""
        import importlib.util, os, sys, time
        spec = importlib.util.spec_from_file_location("profiler_process", {str(module)!r})
        profiler_process = sys.modules["profiler_process"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(profiler_process)
        profiler_process.PRELOAD = ()  # the stand-in scripts need no torch
        profiler = profiler_process.shared_profiler()
        assert profiler is profiler_process.shared_profiler()
        result = profiler.run({str(script(tmp_path, "job"))!r}, {str(tmp_path / "job.json")!r})
        assert result.ok, result
        print(result.pid, profiler._child.folder, flush=True)
    """) + textwrap.dedent(ending)


def _ends(pid: int) -> bool:
    """True once process `pid` has ended (a zombie counts: init reaps an orphan, not this process)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
                return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def test_the_shared_child_is_closed_at_exit(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", _parent_program(tmp_path, "sys.exit(0)")], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    pid, folder = done.stdout.split()
    # closed by the parent at its exit, which waited for it: gone the moment the parent is
    assert not Path(f"/proc/{pid}").exists() and not Path(folder).exists()


def test_the_child_of_a_parent_that_vanished_ends_and_removes_its_files(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", _parent_program(tmp_path, "os._exit(0)")], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    pid, folder = done.stdout.split()
    assert _ends(int(pid))  # its job pipe ended with the parent
    deadline = time.monotonic() + 10
    while Path(folder).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(folder).exists()


def test_a_forked_process_does_not_keep_its_parents_child_alive(tmp_path):
    forks = """
        fork = os.fork()
        if fork == 0:
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 1)
            os.dup2(null, 2)  # NOTE: the test reads the parent's output to its end
            time.sleep(60)
            os._exit(0)
        print(fork, flush=True)
        os._exit(0)
    """
    done = subprocess.run(
        [sys.executable, "-c", _parent_program(tmp_path, forks)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    pid, _, fork = done.stdout.split()
    try:
        assert _ends(int(pid))  # the fork closed its copy of the job pipe: the parent's end was the last
    finally:
        os.kill(int(fork), 9)
