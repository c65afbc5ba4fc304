"""A long-lived child process that runs nvFuser repro scripts under nvFuser's profiler.

Why a child: nvFuser's profiler needs CUPTI to itself, and after torch.profiler has run in a
process (the harness counts kernels with it) nvFuser's profiler ends that whole process. Why one
that lives: starting Python, torch and nvFuser costs seconds, and a harness worker profiles the new
fusions of program after program. So each parent process has one child (`shared_profiler()`),
started on the first job (or ahead of it, `start()`: it loads torch and nvFuser while the parent
goes on), reused by every later one, closed at interpreter exit, and started again on the next job
after it died or was killed.

The protocol (`profiler_child.py` is the other end): a job is `python SCRIPT --profile-json
OUTPUT` run inside the child, sent as one JSON line on a pipe of its own; the answer comes back as
one JSON line on another. Both pipes are dedicated file descriptors passed to the child, not its
stdin and stdout, so nothing a script prints (even raw writes to fds 1 and 2) can garble or fake
an answer, and a script that reads stdin reads /dev/null, not the next job. The child's stdout and
stderr go to files, emptied before each job: their last lines explain a job that killed the child.

How a job ends (`JobResult`): the script ran and wrote OUTPUT; it raised (the child writes its
traceback to OUTPUT.error and carries on); it ended without writing OUTPUT; it ended the child
(os._exit, a segfault: the exit status or signal, and the child's last stderr lines); or it ran
past its timeout (the child dumps its Python stacks to stderr on SIGUSR1, then is killed). The
job after a dead or killed child gets a fresh one.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

PRELOAD = ("torch", "nvfuser_direct")  # what every repro script imports first
JOB_TIMEOUT_S = 600.0  # one script: importing torch and nvFuser (first job), compiling, 30 timed runs
OUTPUT_TAIL_LINES = 20
CHILD_SCRIPT = Path(__file__).with_name("profiler_child.py")
_STACK_DUMP_WAIT_S = 0.3  # how long a timed-out child has to write its stacks before it is killed
_EXIT_WAIT_S = 10.0  # how long a child whose jobs ended has to exit before it is killed


@dataclass(frozen=True)
class JobResult:
    """How one job ended in the child `pid`: `failure` is None when the script ran and wrote its
    output; else how it failed ("the script raised", "exit status 3", "killed by SIGSEGV", "timed
    out after 600 s", ...), with `detail`: the script's traceback, or the child's last stderr lines
    (stdout's where stderr is empty)."""

    pid: int
    failure: str | None = None
    detail: str = ""

    @property
    def ok(self) -> bool:
        """True when the script ran to its end and wrote its output."""
        return self.failure is None


class _NotStarted(Exception):
    """The child died before it took the job (killed between jobs): the job goes to a fresh child."""

    def __init__(self, result: JobResult) -> None:
        super().__init__(result.failure)
        self.result = result


class _Child:
    """One running child: its process, the job and answer pipes, the files its output goes to."""

    def __init__(self, preload: Sequence[str]) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="fusebench-profiler-"))
        self.stdout_path, self.stderr_path = self.folder / "stdout.log", self.folder / "stderr.log"
        jobs_read, self.jobs_fd = os.pipe()
        self.answers_fd, answers_write = os.pipe()
        self.unread = b""
        try:
            with self.stdout_path.open("ab") as stdout, self.stderr_path.open("ab") as stderr:
                self.process = subprocess.Popen(
                    [sys.executable, str(CHILD_SCRIPT), str(jobs_read), str(answers_write), str(self.folder), *preload],
                    stdin=subprocess.DEVNULL,
                    stdout=stdout,
                    stderr=stderr,
                    pass_fds=(jobs_read, answers_write),
                    env={**os.environ, "PYTHONUNBUFFERED": "1"},  # NOTE: a crash loses no buffered line
                )
        except BaseException:
            self._release()
            raise
        finally:
            os.close(jobs_read)
            os.close(answers_write)

    @property
    def alive(self) -> bool:
        return self.process.poll() is None and self.jobs_fd >= 0

    def run(self, job_id: int, script: str, output: str, timeout_s: float) -> JobResult:
        """Runs one job and waits for its answer, at most `timeout_s` seconds. Raises `_NotStarted`
        when the child died before it took the job."""
        pid = self.process.pid
        for path in (self.stdout_path, self.stderr_path):
            os.truncate(path, 0)  # NOTE: the child is idle and flushed; it appends (O_APPEND) after this
        deadline = time.monotonic() + timeout_s
        try:
            _write_all(self.jobs_fd, (json.dumps({"id": job_id, "script": script, "output": output}) + "\n").encode())
            started = self._answer(job_id, deadline)
            answer = None if started is None else self._answer(job_id, deadline)
        except BrokenPipeError:
            started = answer = None
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGUSR1)
            time.sleep(_STACK_DUMP_WAIT_S)
            self.kill()
            return JobResult(pid, f"timed out after {timeout_s:g} s", self.output_tail())
        if started is None:
            how = f"the child {self._how_it_ended()} before it took the job"
            raise _NotStarted(JobResult(pid, how, self.output_tail()))
        if answer is None:
            return JobResult(pid, self._how_it_ended(), self.output_tail())
        if answer["error"] is not None:
            return JobResult(pid, "the script raised", answer["error"])
        if not Path(output).exists():
            return JobResult(pid, f"the script ended without writing {output}", self.output_tail())
        return JobResult(pid)

    def _answer(self, job_id: int, deadline: float) -> dict | None:
        """The next answer line, None when the child closed its end (it died); TimeoutError past `deadline`."""
        poller = select.poll()
        poller.register(self.answers_fd, select.POLLIN)
        while b"\n" not in self.unread:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            if not poller.poll(left * 1000):
                continue
            chunk = os.read(self.answers_fd, 65536)
            if not chunk:
                return None
            self.unread += chunk
        line, _, self.unread = self.unread.partition(b"\n")
        answer = json.loads(line)
        if answer["id"] != job_id:
            raise RuntimeError(f"profiler child {self.process.pid} answered job {answer['id']} while job {job_id} ran")
        return answer

    def _how_it_ended(self) -> str:
        try:
            status = self.process.wait(timeout=_EXIT_WAIT_S)
        except subprocess.TimeoutExpired:  # NOTE: it closed its answer pipe yet lives on
            self.kill()
            return "closed its answer pipe and was killed"
        if status < 0:
            with contextlib.suppress(ValueError):
                return f"killed by {signal.Signals(-status).name}"
            return f"killed by signal {-status}"
        return f"exit status {status}"

    def output_tail(self) -> str:
        """The last lines the child wrote to stderr (to stdout, where it wrote nothing to stderr)."""
        for path in (self.stderr_path, self.stdout_path):
            with contextlib.suppress(OSError):
                lines = path.read_text(errors="replace").rstrip().splitlines()
                if lines:
                    return "\n".join(lines[-OUTPUT_TAIL_LINES:])
        return "(the child wrote nothing to stderr or stdout)"

    def kill(self) -> None:
        """Ends the child now."""
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self.process.wait()

    def close(self) -> None:
        """Ends the child (its job pipe closes: it exits; killed if it does not) and removes its files."""
        if self.jobs_fd >= 0:
            os.close(self.jobs_fd)
            self.jobs_fd = -1
        try:
            self.process.wait(timeout=_EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            self.kill()
        self._release()

    def _release(self) -> None:
        for fd in (self.jobs_fd, self.answers_fd):
            if fd >= 0:
                os.close(fd)
        self.jobs_fd = self.answers_fd = -1
        shutil.rmtree(self.folder, ignore_errors=True)


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]


class ProfilerProcess:
    """Runs profiling jobs one at a time in one long-lived child, started on the first job and again
    after a child died or was killed. Jobs from several threads wait for each other. The child
    imports `preload` (default `PRELOAD`) before it takes jobs."""

    def __init__(self, job_timeout_s: float = JOB_TIMEOUT_S, preload: Sequence[str] | None = None) -> None:
        self.job_timeout_s = job_timeout_s
        self.preload = tuple(PRELOAD if preload is None else preload)
        self.owner_pid = os.getpid()
        self._lock = threading.Lock()
        self._child: _Child | None = None
        self._jobs_sent = 0

    @property
    def pid(self) -> int | None:
        """The process id of the child that will run the next job; None when it has none yet."""
        child = self._child
        return child.process.pid if child is not None and child.alive else None

    def start(self) -> None:
        """Starts the child now, if none runs, without waiting for it: it imports `preload` while the
        caller goes on, so that the first job does not wait for torch and nvFuser to load."""
        with self._lock:
            self._live_child()

    def _live_child(self) -> _Child:
        if self._child is not None and not self._child.alive:  # NOTE: it died between jobs
            self._child.close()
            self._child = None
        if self._child is None:
            self._child = _Child(self.preload)
        return self._child

    def run(self, script: str | Path, output: str | Path, timeout_s: float | None = None) -> JobResult:
        """Runs `python SCRIPT --profile-json OUTPUT` in the child (`job_timeout_s` unless `timeout_s`)."""
        timeout_s = self.job_timeout_s if timeout_s is None else timeout_s
        with self._lock:
            try:
                return self._run(str(script), str(output), timeout_s)
            except _NotStarted:
                pass
            try:  # NOTE: once: a child that cannot even take a job (Python fails to start) fails again
                return self._run(str(script), str(output), timeout_s)
            except _NotStarted as again:
                return again.result

    def _run(self, script: str, output: str, timeout_s: float) -> JobResult:
        child = self._live_child()
        self._jobs_sent += 1
        try:
            result = child.run(self._jobs_sent, script, output, timeout_s)
        except BaseException:  # NOTE: it died before the job, or an interrupt mid-job left it in an unknown state
            child.kill()
            child.close()
            self._child = None
            raise
        if not child.alive:
            child.close()
            self._child = None
        return result

    def close(self) -> None:
        """Ends the child, if any (a later job starts a new one). Does nothing in a forked copy of the
        process that started it."""
        if os.getpid() != self.owner_pid:
            return
        if not self._lock.acquire(timeout=1.0):  # NOTE: at exit, while another thread waits on a job
            child = self._child
            if child is not None:
                child.kill()
            return
        try:
            if self._child is not None:
                self._child.close()
                self._child = None
        finally:
            self._lock.release()

    def __enter__(self) -> ProfilerProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


_shared: ProfilerProcess | None = None
_shared_lock = threading.Lock()


def shared_profiler() -> ProfilerProcess:
    """This process's profiler: one per process (a forked process gets its own, `_after_fork`), its
    child closed at interpreter exit."""
    global _shared
    with _shared_lock:
        if _shared is None or _shared.owner_pid != os.getpid():
            _shared = ProfilerProcess()
            atexit.register(_shared.close)
        return _shared


def _after_fork() -> None:
    """In a forked process (a DataLoader's workers): closes its copies of the shared child's pipes,
    so that the child still sees its job pipe end when the parent's end closes, and forgets that
    child, which stays its parent's."""
    global _shared, _shared_lock
    child = None if _shared is None else _shared._child
    if child is not None:
        for fd in (child.jobs_fd, child.answers_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
    _shared, _shared_lock = None, threading.Lock()  # NOTE: another thread may have held the lock at the fork


os.register_at_fork(after_in_child=_after_fork)
