"""Measuring units in worker processes: one per device, and a crash costs one unit, not the run.

A unit is one (case, params, variant) of the run's plan, named by its index. A worker is the same
`fusebench run` started with `--worker`: it reads unit indices from stdin, one per line, measures
each (recording it in the results itself, so nothing measured is lost whatever happens later),
and answers with the outcome as one JSON line on a pipe of its own (`--outcomes-fd`), so what a
case prints cannot garble the answers. Its stdout and stderr are forwarded here line by line,
prefixed with its device.

A unit that runs longer than the run's unit time limit (`fusebench run --unit-timeout`: a compile
that hangs, a peer that takes minutes) is stopped: its worker is killed, the unit is `crashed` with
"stopped after N s", and a fresh worker takes the next unit. The limit counts from the unit's start,
less any time the worker spent stopped while another worker of its GPU timed; a worker says when it
is ready (its imports and set-up are not the first unit's time).

Several workers on one host each keep to their own share of its CPUs (and Inductor compiles with
that many processes), so one worker's compile does not slow another's timed calls. Several workers
on one GPU (`--jobs`) compile and check at once and take turns on it for everything timed, each
the leader of its own process group, which the timed worker stops while its repeats run
(`fusebench.measure.turns`); a worker that ends without answering may have left the others
stopped, so they are continued.

Each device has a thread that hands the next unit of one shared queue to its worker (so a fast
GPU takes more units) and waits for the answer. The queue keeps a worker on the group of units it
is on (one case and parameters: their inputs and reference are made once per worker), gives a
worker that needs a new group one no other worker is on, and only when every group left is taken
lets it join one. When a worker's pipe ends without an answer, the worker died measuring that
unit (a segfault or abort in nvFuser, a CUDA error that ended it): the unit is `crashed`, with the
signal or exit status and the last lines of the worker's output, and a fresh worker takes the next
unit.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fusebench.measure.turns import TURN_ENV, signal_group, turn_file

OUTPUT_TAIL_LINES = 20
Report = Callable[[str], None]
Answer = Callable[[int, str, "dict[str, Any] | Crash"], None]  # (unit, device, outcome JSON or how it crashed)
READY = {"ready": True}  # a worker's first line on its answer pipe, once it reads units
WORKER_CPUS = "FUSEBENCH_WORKER_CPUS"  # the CPUs a worker keeps to, where several share a host
POLL_S = 1.0  # how often a unit's time limit looks whether its worker is stopped
SIGNAL_POLL_S = 0.25  # how often the run's main thread wakes to take a Ctrl-C meant for it


@dataclass(frozen=True)
class Crash:
    """How a worker ended without answering a unit: `detail` (the signal or exit status, and its last
    output), and `time_limit_s` where it was stopped because the unit ran past that limit."""

    detail: str
    time_limit_s: float | None = None


@dataclass(frozen=True)
class Device:
    """Where a worker runs: its label ('cuda:1', or 'cpu#0' for the first of several CPU workers), the
    `--device` it is given and its environment."""

    label: str
    device_type: str
    env: dict[str, str]


def devices_from(spec: str, cuda_count: int, jobs: int = 1, turns: Path | None = None) -> list[Device]:
    """'cuda:0,cuda:1', 'all' (every visible GPU) or 'cpu,cpu' as worker devices; `jobs` workers
    per GPU ('cuda:0#1', 'cuda:0#2', ...), which take turns on it through a lock file in `turns`
    (`fusebench.measure.turns`).

    A GPU worker sees only its GPU (CUDA_VISIBLE_DEVICES), as cuda:0: every worker records the
    same environment, so all results merge into one ASV history.
    """
    if jobs < 1 or (jobs > 1 and turns is None):
        raise ValueError(f"--jobs {jobs}: expected a whole number of workers per GPU, at least 1")
    if spec == "all" and cuda_count == 0:
        raise ValueError(
            "--devices all: no GPU is visible here (torch.cuda.device_count() is 0); for CPU workers use cpu,cpu"
        )
    names = [f"cuda:{i}" for i in range(cuda_count)] if spec == "all" else [s.strip() for s in spec.split(",")]
    if not names or not all(names):
        raise ValueError(f"--devices {spec!r}: expected 'all' or a comma-separated list like cuda:0,cuda:1")
    devices: list[Device] = []
    for number, name in enumerate(names):
        if name == "cpu":
            devices.append(Device(f"cpu#{number}", "cpu", {}))
            continue
        kind, _, index = name.partition(":")
        if kind != "cuda" or not index.isdigit() or int(index) >= cuda_count:
            raise ValueError(f"--devices: {name!r} is not 'cpu' or 'cuda:N' with N below the {cuda_count} GPUs here")
        if names.index(name) != number:
            raise ValueError(f"--devices: {name} is named twice: for several workers on one GPU, use --jobs")
        if jobs == 1:
            devices.append(Device(name, "cuda", {"CUDA_VISIBLE_DEVICES": index}))
            continue
        env = {"CUDA_VISIBLE_DEVICES": index, TURN_ENV: turn_file(turns, index)}
        devices += [Device(f"{name}#{job}", "cuda", env) for job in range(1, jobs + 1)]
    return _with_cpu_shares(devices, available_cpus())


MAX_DEFAULT_JOBS = 4
CPUS_PER_JOB = 4  # a worker compiles (Inductor's and thunder's compilations) on this many CPUs
DEVICE_BYTES_PER_JOB = 20 << 30  # and holds a case's inputs, reference and compiled state in this much


def default_jobs(cpus: int, gpus: int, device_bytes: int) -> int:
    """Workers per GPU when `--jobs` is not given: one per `CPUS_PER_JOB` of the host's `cpus` (shared
    by the workers of all `gpus`) and per `DEVICE_BYTES_PER_JOB` of a GPU's memory, at most
    `MAX_DEFAULT_JOBS`, at least 1."""
    by_cpus = cpus // (CPUS_PER_JOB * max(gpus, 1))
    return max(1, min(MAX_DEFAULT_JOBS, by_cpus, device_bytes // DEVICE_BYTES_PER_JOB))


def available_cpus() -> list[int]:
    """The CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def cpu_shares(count: int, cpus: Sequence[int]) -> list[tuple[int, ...]]:
    """`cpus` split into `count` disjoint, contiguous shares, as even as can be (empty shares when
    there are fewer CPUs than `count`)."""
    if count < 1 or len(cpus) < count:
        return [()] * max(count, 0)
    size, extra = divmod(len(cpus), count)
    shares, start = [], 0
    for number in range(count):
        end = start + size + (number < extra)
        shares.append(tuple(cpus[start:end]))
        start = end
    return shares


def _with_cpu_shares(devices: list[Device], cpus: Sequence[int]) -> list[Device]:
    """Several workers on one host each get their own share of its CPUs (WORKER_CPUS, applied by
    the worker with `apply_cpu_share`), and Inductor compiles with that many processes: one worker's
    compile (Inductor starts a process per core by default) then cannot take the CPU time another
    worker's timed calls need."""
    if len(devices) < 2:
        return devices
    shared = []
    for device, share in zip(devices, cpu_shares(len(devices), cpus)):
        env = dict(device.env)
        if share:
            env[WORKER_CPUS] = ",".join(str(cpu) for cpu in share)
            if "TORCHINDUCTOR_COMPILE_THREADS" not in os.environ:  # the user's own setting stands
                env["TORCHINDUCTOR_COMPILE_THREADS"] = str(len(share))
        shared.append(Device(device.label, device.device_type, env))
    return shared


def apply_cpu_share() -> None:
    """In a worker: keeps this process (and the processes it starts) on the CPUs its parent gave it
    (WORKER_CPUS), where it was given any."""
    value = os.environ.get(WORKER_CPUS)
    if value and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, [int(cpu) for cpu in value.split(",")])


def past(deadline: float | None, clock: Callable[[], float] = time.perf_counter) -> bool:
    """Whether a run's deadline (a `clock()` value; None: none) has passed."""
    return deadline is not None and clock() >= deadline


class UnitQueue:
    """The units left to measure, shared by the devices' threads; `take` hands out the next one for
    a worker, keeping each worker on its group (`group_of(unit)`) while the group has units left.
    A unit that must stay `together` with its group's others (it is timed alternately with those
    measured before it in the same process: `fusebench.measure.paired`) is left to the worker on its
    group; other units a worker with nothing of its own may take from any group. Once `deadline`
    (a `clock()` value) has passed, none is handed out."""

    def __init__(
        self,
        units: Sequence[int],
        group_of: Callable[[int], Hashable],
        together: Callable[[int], bool] = lambda unit: False,
        deadline: float | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._deadline, self._clock = deadline, clock
        self._pending = list(units)
        self._group = {unit: group_of(unit) for unit in units}
        self._together = {unit: together(unit) for unit in units}
        self._on: dict[Hashable, Hashable] = {}  # worker -> the group it is on
        self._workers_on: Counter[Hashable] = Counter()  # group -> how many workers are on it
        self._lock = threading.Lock()

    def take(self, worker: Hashable) -> int | None:
        """The next unit for `worker`: of its group if any is left, else the first of a group no worker
        is on, else the first left that need not stay together with its group; None when none is."""
        with self._lock:
            if past(self._deadline, self._clock):
                return None
            group = self._on.get(worker)
            unit = next((u for u in self._pending if self._group[u] == group), None)
            if unit is None:
                self._leave(worker)
                unit = next((u for u in self._pending if not self._workers_on[self._group[u]]), None)
                if unit is not None:
                    self._on[worker] = self._group[unit]
                    self._workers_on[self._group[unit]] += 1
                else:  # NOTE: a unit of another worker's group, without joining it
                    unit = next((u for u in self._pending if not self._together[u]), None)
                    if unit is None:
                        return None
            self._pending.remove(unit)
            return unit

    def restart(self, worker: Hashable) -> None:
        """`worker`'s process was replaced: it is on no group any more (a fresh one prepares anew)."""
        with self._lock:
            self._leave(worker)

    def _leave(self, worker: Hashable) -> None:
        group = self._on.pop(worker, None)
        if group is not None:
            self._workers_on[group] -= 1


def run_units(
    worker_args: Sequence[str],
    devices: Sequence[Device],
    units: Sequence[int],
    answer: Answer,
    report: Report,
    group_of: Callable[[int], Hashable] = lambda unit: unit,
    unit_timeout_s: float | None = None,
    together: Callable[[int], bool] = lambda unit: False,
    deadline: float | None = None,
) -> None:
    """Measures `units` over one worker per device; calls `answer` once per unit as it finishes.
    Units of one `group_of` (the same prepared inputs) go to the same worker where they can, and
    those `together` says are paired with the others always do (`UnitQueue`); a unit still running
    after `unit_timeout_s` (None: no limit) is stopped and answered as crashed. None starts after
    `deadline` (a `time.perf_counter()` value; None: none): those left are not answered."""
    pending = UnitQueue(units, group_of, together, deadline)
    errors: list[BaseException] = []
    live = _Live()

    def serve(device: Device) -> None:
        try:
            _serve(worker_args, device, pending, answer, report, unit_timeout_s, live)
        except BaseException as error:  # NOTE: re-raised in the main thread below
            errors.append(error)

    threads = [threading.Thread(target=serve, args=(d,), daemon=True) for d in devices]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            # NOTE: joined in short waits: Ctrl-C that the kernel hands to another thread of the
            # run only reaches this one when it wakes (a plain join would wait for the unit)
            while thread.is_alive():
                thread.join(timeout=SIGNAL_POLL_S)
    except BaseException:  # NOTE: Ctrl-C: workers in their own process groups do not see it
        live.kill_all()
        raise
    if errors:
        raise errors[0]


class _Live:
    """The run's live workers. Where several share a GPU, one stops the others while its timed
    repeats run (`fusebench.measure.turns.quiet_host`); when a worker ends without answering, it
    may have left them stopped, so every other is continued."""

    def __init__(self) -> None:
        self._workers: set[_Worker] = set()
        self._lock = threading.Lock()
        self.stopping = False  # the run was interrupted: a worker's end is no unit's crash

    def add(self, worker: _Worker) -> None:
        with self._lock:
            self._workers.add(worker)

    def remove(self, worker: _Worker) -> None:
        with self._lock:
            self._workers.discard(worker)

    def continue_all(self) -> None:
        """Continues every worker that leads its own process group (harmless where none is stopped)."""
        with self._lock:
            for worker in self._workers:
                if worker.own_group:
                    signal_group(worker.process.pid, signal.SIGCONT)

    def kill_all(self) -> None:
        """Kills every worker and what it started (the run was interrupted)."""
        with self._lock:
            self.stopping = True
            for worker in self._workers:
                worker.kill()


class _Worker:
    """One worker process, its answer pipe and the tail of its output."""

    def __init__(self, worker_args: Sequence[str], device: Device, report: Report) -> None:
        read_fd, write_fd = os.pipe()
        command = [sys.executable, "-m", "fusebench", "run", *worker_args, "--device", device.device_type]
        command += ["--worker", "--outcomes-fd", str(write_fd)]
        # NOTE: a worker sharing its GPU leads its own process group, which another worker stops whole
        self.own_group = TURN_ENV in device.env
        self.process = subprocess.Popen(
            command,
            env={**os.environ, **device.env},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            pass_fds=(write_fd,),
            start_new_session=self.own_group,
        )
        os.close(write_fd)
        self.answers = os.fdopen(read_fd)
        self.tail: deque[str] = deque(maxlen=OUTPUT_TAIL_LINES)
        self.ready = False
        self.timed_out: float | None = None  # the limit a unit ran past (the worker was killed)
        self.forwarder = threading.Thread(target=self._forward, args=(device.label, report), daemon=True)
        self.forwarder.start()

    def _forward(self, label: str, report: Report) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.tail.append(line.rstrip("\n"))
            report(f"  {label}| {line.rstrip()}")

    def measure(self, unit: int, timeout_s: float | None = None) -> dict[str, Any] | None:
        """The outcome JSON of `unit`, or None when the worker died before answering or was killed
        because the unit ran past `timeout_s` (then `timed_out` is set)."""
        assert self.process.stdin is not None
        if not self.ready:
            line = self.answers.readline()  # NOTE: its start-up, however long, is not the unit's time
            if not line:
                return None
            self.ready = json.loads(line) == READY
        try:
            self.process.stdin.write(f"{unit}\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            return None
        if timeout_s is not None and not self._answers_within(timeout_s):
            self.timed_out = timeout_s
            self.kill()
            return None
        line = self.answers.readline()
        return json.loads(line) if line else None

    def _answers_within(self, timeout_s: float) -> bool:
        """Whether an answer comes before the worker has run `timeout_s` seconds: time it spends
        stopped while another worker of its GPU times (`quiet_host`) does not count."""
        left = timeout_s
        while True:
            start = time.monotonic()
            if select.select([self.answers], [], [], min(left, POLL_S))[0]:
                return True
            if not is_stopped(self.process.pid):
                left -= time.monotonic() - start
            if left <= 0:
                return False

    def kill(self) -> None:
        """Kills the worker, and the processes it started where it leads their group."""
        if not (self.own_group and signal_group(self.process.pid, signal.SIGKILL)):
            self.process.kill()

    def crash(self) -> Crash:
        """How the worker ended (signal, exit status or the unit time limit) and the last lines it printed."""
        returncode = self.process.wait()
        self.forwarder.join(timeout=10)
        if self.timed_out is not None:
            how = f"stopped after {self.timed_out:g} s (the unit time limit, --unit-timeout)"
        elif returncode < 0:
            how = f"killed by {signal.Signals(-returncode).name}"
        else:
            how = f"exit status {returncode}"
        last = [line for line in self.tail if line.strip()][-3:]
        return Crash(how + (f" | last output: {' / '.join(last)}" if last else ""), self.timed_out)

    def close(self) -> None:
        """Ends the worker (its stdin closes: it finishes and exits), or kills it when it does not."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.kill()
            self.process.wait()
        self.forwarder.join(timeout=10)
        self.answers.close()


def _serve(
    worker_args: Sequence[str],
    device: Device,
    pending: UnitQueue,
    answer: Answer,
    report: Report,
    unit_timeout_s: float | None,
    live: _Live,
) -> None:
    worker: _Worker | None = None
    try:
        while (unit := pending.take(device.label)) is not None:
            if worker is None:
                worker = _Worker(worker_args, device, report)
                live.add(worker)
            result = worker.measure(unit, unit_timeout_s)
            if live.stopping:
                return
            if result is None:
                live.remove(worker)
                live.continue_all()  # NOTE: it may have died while the others were stopped
            answer(unit, device.label, worker.crash() if result is None else result)
            if result is None or result.get("worker_exits"):
                # NOTE: it died, or ended itself after a CUDA error, which poisons its context
                live.remove(worker)
                worker.close()
                worker = None
                pending.restart(device.label)
    finally:
        if worker is not None:
            live.remove(worker)
            worker.close()


def is_stopped(pid: int) -> bool:
    """Whether process `pid` is stopped (by SIGSTOP); False where that cannot be read (not Linux)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] == "T"
