"""Throwaway git repositories for the tests of commands that check revisions out."""

from __future__ import annotations

import subprocess
from pathlib import Path


def one_commit_repo(path: Path) -> Path:
    """A new repository at `path` with one commit of one file."""
    path.mkdir()
    subprocess.run(["git", "-C", str(path), "init", "-q"], check=True)
    (path / "README").write_text("x\n")
    subprocess.run(["git", "-C", str(path), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@x.invalid", "commit", "-qm", "one"],
        check=True,
    )
    return path
