"""nvFuser's compiled kernels kept on disk between processes, as Inductor keeps its caches.

nvFuser can keep each kernel it compiles (CUDA source, compile flags, cubin) in a directory and
load the cubin instead of running NVRTC when a later process generates the same source with the
same flags (its `kernel_db` option): a process that meets kernels an earlier one compiled (the
next sample of a benchmark, the next run of a test) loads them instead of compiling them again.

nvFuser's database is unsafe to share: it names files by a counter, so two processes writing one
directory can overwrite each other's kernels. Each process therefore takes a slot of its own: the
first `slot_<k>` directory whose lock file no other process holds (`fcntl.flock`, released when
the process exits), so processes that run one after another reuse one slot and concurrent ones
(one `fusebench run` worker per GPU) get separate slots. nvFuser opens the database at
`$TMPDIR/nvfuser_kernel_db` the first time a compilation asks for it, so `compiling()` sets
`TMPDIR` to the slot during each call that may compile and hands the call the `kernel_db` option;
other calls run as before. The database is keyed by the nvFuser and CUDA versions (a directory
each), and a slot whose database holds more than `MAX_BYTES` is emptied before use: nvFuser never
evicts, and reads every kernel's source (each with its runtime headers) when it opens it.

Environment: `FUSEBENCH_NVFUSER_KERNEL_DB=0` turns it off; a path puts the slots there instead of
`$XDG_CACHE_HOME/fusebench/nvfuser_kernel_db` (default `~/.cache/...`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import torch

KERNEL_DB_ENV = "FUSEBENCH_NVFUSER_KERNEL_DB"
MAX_BYTES = 256 << 20
MAX_SLOTS = 64
_DB_DIR = "nvfuser_kernel_db"  # NOTE: the directory nvFuser opens under the temporary directory

_slot: Path | None = None
_lock_file: int | None = None  # the open lock file descriptor that holds the slot, kept until exit
_tried = False
_owner = os.getpid()  # NOTE: a forked child inherits the slot's lock with this module's state: it takes its own


def root(version: str) -> Path | None:
    """The directory holding the slots for this nvFuser `version`, or None when turned off."""
    setting = os.environ.get(KERNEL_DB_ENV, "").strip()
    if setting.lower() in ("0", "false", "no", "off"):
        return None
    if setting and setting.lower() not in ("1", "true", "yes", "on"):
        base = Path(setting).expanduser()
    else:
        cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        base = Path(cache) / "fusebench" / _DB_DIR
    return base / f"nvfuser-{version}-cuda-{torch.version.cuda or 'none'}"


def _bytes_held(slot: Path) -> int:
    try:
        return sum(entry.stat().st_size for entry in os.scandir(slot / _DB_DIR) if entry.is_file())
    except OSError:
        return 0


def take_slot(directory: Path, max_bytes: int = MAX_BYTES) -> tuple[Path, int] | None:
    """The first `slot_<k>` under `directory` no other process holds, locked for this process:
    (the slot, the lock's file descriptor), or None when every slot is taken or the directory
    cannot be written. A slot holding more than `max_bytes` is emptied first."""
    try:
        import fcntl
    except ImportError:  # NOTE: no POSIX file locks (Windows): no slot is safe
        return None
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    for k in range(MAX_SLOTS):
        slot = directory / f"slot_{k}"
        try:
            fd = os.open(directory / f"slot_{k}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held by another process
            os.close(fd)
            continue
        if _bytes_held(slot) > max_bytes:
            shutil.rmtree(slot / _DB_DIR, ignore_errors=True)
        slot.mkdir(exist_ok=True)
        return slot, fd
    return None


def slot(version: str) -> Path | None:
    """This process's slot (taken on the first call), or None when the database is off or no slot is free."""
    global _slot, _lock_file, _tried, _owner
    if _owner != os.getpid():
        _owner, _tried, _slot, _lock_file = os.getpid(), False, None, None
    if not _tried:
        _tried = True
        directory = root(version)
        taken = take_slot(directory) if directory is not None else None
        if taken is not None:
            _slot, _lock_file = taken
    return _slot


_env_lock = threading.Lock()
_inside = 0  # calls inside `compiling` now (threads may compile at once)
_tmpdir_before: str | None = None


@contextlib.contextmanager
def compiling(version: str) -> Iterator[list[str]]:
    """Around an nvFuser call that may compile: the enable options to pass it (`["kernel_db"]`,
    or none when the database is off), with `TMPDIR` pointing at this process's slot meanwhile
    (set by the first of concurrent calls, restored by the last)."""
    global _inside, _tmpdir_before
    where = slot(version)
    if where is None:
        yield []
        return
    with _env_lock:
        if _inside == 0:
            _tmpdir_before = os.environ.get("TMPDIR")
            os.environ["TMPDIR"] = str(where)
        _inside += 1
    try:
        yield ["kernel_db"]
    finally:
        with _env_lock:
            _inside -= 1
            if _inside == 0:
                if _tmpdir_before is None:
                    os.environ.pop("TMPDIR", None)
                else:
                    os.environ["TMPDIR"] = _tmpdir_before
