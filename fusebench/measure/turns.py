"""Turns on a shared GPU: several worker processes measure on one GPU (`fusebench run --jobs N`).

They make inputs, compile and check results at the same time, each on its own share of the host's
CPUs; what must have the device to itself, making a case's inputs and reference, warm-up, timed
repeats and kernel counts, each does in its turn, which a lock file taken with
`flock` gives one worker at a time (`TURN_ENV` names it; without it, a worker has the device to
itself and takes no turn). The lock goes with the process: a worker that dies gives its turn up.

The GPU is then the timed worker's alone, and so is the host while its timed repeats run
(`quiet_host`): the other workers of the GPU, each the leader of its own process group, are
stopped (SIGSTOP to the group: their compiler processes too) and continued after. Each worker
registers its group in a folder beside the lock file (`join_turns`); the parent continues every
worker's group when one dies or is killed (`fusebench.measure.workers`), so none stays stopped.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # NOTE: not on Windows, where a run has one worker per device
    fcntl = None  # type: ignore[assignment]

TURN_ENV = "FUSEBENCH_DEVICE_TURN"  # the lock file of the device this worker shares with others


def turns_supported() -> bool:
    """Whether workers can take turns here (POSIX file locks: not on Windows, where a GPU gets one
    worker unless `--jobs` asks for more)."""
    return fcntl is not None


def turn_file(directory: Path, device_index: str) -> str:
    """The lock file the workers of GPU `device_index` share, in the run's `directory`."""
    return str(directory / f"cuda{device_index}.turn")


@contextlib.contextmanager
def device_turn(waiting: contextlib.AbstractContextManager | None = None) -> Iterator[None]:
    """Holds this worker's turn on its device for the block; `waiting` is entered while it waits
    for the turn (a phase timer). No turn to take where the worker has the device to itself."""
    path = os.environ.get(TURN_ENV)
    if not path or fcntl is None:
        yield
        return
    with open(path, "a") as lock:
        with waiting or contextlib.nullcontext():
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _members(path: str) -> Path:
    return Path(path + ".workers")


@contextlib.contextmanager
def join_turns() -> Iterator[None]:
    """Registers this worker, where it shares its device and leads its own process group, as one
    that `quiet_host` stops while another worker's timed repeats run; unregisters it after."""
    path = os.environ.get(TURN_ENV)
    if not path or fcntl is None or os.getpgid(0) != os.getpid():
        yield
        return
    entry = _members(path) / str(os.getpid())
    entry.parent.mkdir(exist_ok=True)
    entry.touch()
    try:
        yield
    finally:
        entry.unlink(missing_ok=True)


@contextlib.contextmanager
def quiet_host() -> Iterator[list[int]]:
    """Stops the other registered workers of this device (and the processes they started) for the
    block, and continues them after; to be held inside `device_turn`. Gives the process groups it
    stopped: none where the worker has the device to itself."""
    path = os.environ.get(TURN_ENV)
    if not path or fcntl is None:
        yield []
        return
    members = _members(path)
    groups = [int(entry.name) for entry in members.iterdir()] if members.is_dir() else []
    own = os.getpgid(0)
    stopped = [group for group in groups if group != own and signal_group(group, signal.SIGSTOP)]
    try:
        yield stopped
    finally:
        for group in stopped:
            signal_group(group, signal.SIGCONT)


def signal_group(group: int, sig: signal.Signals) -> bool:
    """Sends `sig` to process group `group`; False when there is no such group (a worker gone)."""
    try:
        os.killpg(group, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True
