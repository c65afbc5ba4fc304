"""Turns on a shared GPU: several worker processes measure on one GPU (`fusebench run --jobs N`).

They make inputs, compile and check results at the same time, each on its own share of the host's
CPUs; what must have the device to itself, making a case's inputs and reference, warm-up, timed
repeats, kernel counts and profiling, each does in its turn, which a lock file taken with
`flock` gives one worker at a time (`TURN_ENV` names it; without it, a worker has the device to
itself and takes no turn). The lock goes with the process: a worker that dies gives its turn up.

The GPU is the timed worker's alone; the host is not: a host-bound case's calls share the host's
caches and power budget with the other workers' compilation, and read slower than with one worker,
which is why a run has one worker per GPU unless `--jobs` asks for more.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # NOTE: not on Windows, where a run has one worker per device
    fcntl = None  # type: ignore[assignment]

TURN_ENV = "FUSEBENCH_DEVICE_TURN"  # the lock file of the device this worker shares with others


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
