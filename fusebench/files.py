"""Atomic file writes: a reader (or a crash) sees the old file or the new one, never half of one;
and a lock file, so that processes merging into one file take turns.

The text goes to a temporary file in the destination's folder (named `.<name>.<random>.tmp`, so
ASV, which loads every `*.json` under its results folder, never picks it up), is flushed and
fsync'ed, and then renamed over the destination with `os.replace`, which is atomic on POSIX and
Windows. If anything fails before the rename, the temporary file is removed and the destination
is untouched. The file gets the mode `open()` would give a new file (0666 less the umask: 0644
usually), not `mkstemp`'s private 0600, so results are readable by whoever reads asv's.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Replaces the file at `path` with `text` (UTF-8) atomically; creates parent folders."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp_name, path)
    except BaseException:
        # NOTE: BaseException too: a Ctrl-C between write and rename must not leave the temp file.
        Path(temp_name).unlink(missing_ok=True)
        raise
    return path


def _umask() -> int:
    """The process's umask, read from /proc where it can be (setting it to read it back would race
    with threads creating files meanwhile)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_json(path: str | os.PathLike[str], data: Any, *, indent: int | None = None) -> Path:
    """Serializes `data` first (so a serialization error leaves the file untouched), then writes atomically."""
    text = json.dumps(data, indent=indent, sort_keys=indent is not None)
    return atomic_write_text(path, text + "\n")


def read_json(path: str | os.PathLike[str]) -> Any:
    """The JSON document at `path`."""
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


@contextlib.contextmanager
def file_lock(path: str | os.PathLike[str]) -> Iterator[None]:
    """Holds an exclusive lock on the file at `path` (created if missing) while the block runs.

    Every process that read-modify-writes a shared file (the `fusebench run` workers of several
    GPUs merging into one ASV result file) takes it first; the OS releases it if a holder dies.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
