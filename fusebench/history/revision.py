"""Which revision of the project is being measured: the git commit of the code under test.

The code under test is the `compiler` package fusebench imports, so the commit is that of the
git work tree holding it (the checkout `fusebench compare` makes for each side, for example).
Outside git the commit is forty zeros and `dirty` is None.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from fusebench.errors import check

UNKNOWN_COMMIT = "0" * 40


@dataclass(frozen=True)
class Revision:
    """A commit hash, its commit date (ms since the epoch, as ASV stores it) and local changes."""

    commit: str
    date_ms: int
    dirty: bool | None


def code_revision() -> Revision:
    """The revision of the work tree that holds the `compiler` package."""
    spec = importlib.util.find_spec("compiler")
    origin = Path(spec.origin).parent if spec and spec.origin else Path.cwd()
    return revision_of(origin)


def commit_revision(commit: str) -> Revision:
    """A revision named by hand (when the code under test is not in a git tree), dated now."""
    check(
        re.fullmatch(r"[0-9a-f]{7,40}", commit) is not None,
        lambda: f"--commit {commit!r}: expected a hexadecimal git commit hash (7 to 40 digits)",
    )
    return Revision(commit, int(time.time() * 1000), None)


def revision_of(path: Path) -> Revision:
    """The revision of the git work tree containing `path`."""
    try:
        commit = _git(path, "rev-parse", "HEAD")
        seconds = int(_git(path, "show", "-s", "--format=%ct", "HEAD"))
        dirty = bool(_git(path, "status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError, ValueError):
        return Revision(UNKNOWN_COMMIT, int(time.time() * 1000), None)
    return Revision(commit, seconds * 1000, dirty)


def _git(path: Path, *args: str) -> str:
    result = subprocess.run(["git", "-C", str(path), *args], capture_output=True, text=True, timeout=30, check=True)
    return result.stdout.strip()
