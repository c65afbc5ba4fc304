"""Temporary git worktrees: a revision checked out beside the user's, and always removed again.

`temporary_worktrees(repo, commits)` checks every commit out (detached) into a fresh temporary
folder with `git worktree add`, yields the folders, and on the way out, whether the body
returned, raised or was interrupted (Ctrl-C, or SIGTERM while inside `terminate_as_interrupt`),
removes each worktree with `git worktree remove --force`, deletes what is left of the folder and
prunes git's worktree records. The user's checkout, index and branches are never touched.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType

from fusebench.errors import FusebenchError

GIT_TIMEOUT_S = 120


class GitError(FusebenchError):
    """A git command failed, or a path or revision is not what git expects."""


def git(repo: Path, *args: str) -> str:
    """Runs `git -C repo ARGS` and returns its stdout (stripped); raises GitError with git's message."""
    try:
        result = subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError) as error:
        raise GitError(f"`git {' '.join(args)}` could not run in {repo}: {error}") from error
    if result.returncode != 0:
        message = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else f"exit {result.returncode}"
        raise GitError(f"`git {' '.join(args)}` failed in {repo}: {message}")
    return result.stdout.strip()


def repository_root(path: Path | str) -> Path:
    """The top folder of the git work tree containing `path`."""
    path = Path(path)
    if not path.exists():
        raise GitError(f"--repo {path}: no such folder (expected a git checkout)")
    try:
        return Path(git(path, "rev-parse", "--show-toplevel"))
    except GitError as error:
        raise GitError(f"--repo {path}: not inside a git work tree ({error})") from error


def resolve_commit(repo: Path, revision: str) -> str:
    """The full hash of the commit `revision` names (a branch, tag, hash, HEAD~2, ...)."""
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
    except GitError:
        raise GitError(
            f"revision {revision!r} is not a commit in {repo} (expected a branch, tag or commit hash; "
            "see `git log --oneline`)"
        ) from None


@contextlib.contextmanager
def temporary_worktrees(repo: Path, commits: Sequence[str], prefix: str = "fusebench-") -> Iterator[list[Path]]:
    """Checks each commit out into its own temporary worktree; yields their paths; always removes them."""
    base = Path(tempfile.mkdtemp(prefix=prefix))
    created: list[Path] = []
    try:
        for index, commit in enumerate(commits):
            path = base / f"side{index}"
            # NOTE: a `git worktree add` killed halfway leaves its worktree locked ("initializing"),
            # and `git worktree prune` keeps locked worktrees: an interruption waits for the add.
            with _signals_deferred():
                git(repo, "worktree", "add", "--detach", "--quiet", str(path), commit)
                created.append(path)
        yield created
    finally:
        _remove(repo, base, created)


def _remove(repo: Path, base: Path, worktrees: list[Path]) -> None:
    # NOTE: a second Ctrl-C while cleaning up must not leave worktrees behind.
    with _signals_deferred():
        for path in worktrees:
            with contextlib.suppress(GitError):
                git(repo, "worktree", "remove", "--force", str(path))
        shutil.rmtree(base, ignore_errors=True)
        with contextlib.suppress(GitError):
            git(repo, "worktree", "prune")


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """Holds SIGINT and SIGTERM until the block is done (main thread only; elsewhere a no-op)."""
    received: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    try:
        previous = {sig: signal.signal(sig, hold) for sig in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # NOTE: not the main thread: signals cannot be handled here anyway
        yield
        return
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if received:
            raise KeyboardInterrupt


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Turns SIGTERM into KeyboardInterrupt inside the block, so `finally` clean-ups run on `kill` too."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
