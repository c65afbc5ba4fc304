"""Every fenced code block of README.md and docs/*.md runs, so none can go stale.

A file's blocks run in document order, in a throwaway git repository made of the current tree
with two commits (so `HEAD~1 HEAD` exist), as working folder:
- ```python blocks share one namespace per file (a later block may use an earlier one's names);
- ```bash blocks: each command (a line, with its `\\` continuations) runs: `fusebench ...` through
  its entry point in this process (a fresh interpreter would cost a torch import per command),
  `pytest ...` in a subprocess with this interpreter's scripts first on PATH; no shell syntax.
  `fusebench compare` may exit 1 when a row reads slower at B (noise can do that), not when one failed;
- ```mermaid blocks are diagrams: nothing to run.
A marker, an HTML comment on the line before the fence, changes that:
- `<!-- gpu -->` / `<!-- nvfuser -->`: runs only in the file's GPU test, marked `gpu` / `nvfuser`
  (skipped with the reason elsewhere), which runs the file's Python blocks again in order with
  the marked ones among them, and the marked commands;
- `<!-- file: PATH -->`: a Python block written to PATH (a suite module the commands after it
  use) instead of run here;
- `<!-- setup -->`: the README's two set-up commands, which install packages:
  tests/harness/test_readme.py checks them against `.ci/run`, which runs them;
- `<!-- ci -->`: commands `.ci/run` runs after the tests (ASV): each must be one of them.
Any other language or marker fails `test_every_block_can_be_run`, so no block escapes.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from fusebench.cli import main

ROOT = Path(__file__).resolve().parents[2]
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN = {"python", "bash"}
DIAGRAMS = {"mermaid"}
MARKERS = {"gpu", "nvfuser", "setup", "ci", "file"}
DEVICE_MARKERS = {"gpu", "nvfuser"}
COMMANDS = ("fusebench ", "pytest ")
COMMAND_TIMEOUT_S = 300
_MARKER = re.compile(r"^<!--\s*(.*?)\s*-->$")


@dataclass(frozen=True)
class Snippet:
    """One fenced block: where it opens, its language, the marker before it, its text."""

    path: Path
    line: int
    language: str
    marker: str | None
    body: str

    @property
    def where(self) -> str:
        path = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path
        return f"{path}:{self.line}"

    @property
    def kind(self) -> str | None:
        """The marker's name: 'gpu', 'file', ... (None: unmarked)."""
        return None if self.marker is None else self.marker.split(":")[0].strip()

    @property
    def target(self) -> str:
        """The path a `<!-- file: PATH -->` block is written to."""
        return self.marker.split(":", 1)[1].strip() if self.marker else ""


def snippets(path: Path) -> list[Snippet]:
    """The fenced blocks of a Markdown file, in order."""
    found, lines = [], path.read_text().splitlines()
    opened: tuple[int, str, str | None] | None = None
    body: list[str] = []
    for number, line in enumerate(lines, start=1):
        if not line.startswith("```"):
            if opened is not None:
                body.append(line)
            continue
        if opened is None:
            previous = lines[number - 2].strip() if number > 1 else ""
            marker = _MARKER.match(previous)
            opened, body = (number, line[3:].strip(), marker.group(1) if marker else None), []
        else:
            found.append(Snippet(path, opened[0], opened[1], opened[2], "\n".join(body) + "\n"))
            opened = None
    assert opened is None, f"{path.relative_to(ROOT)}:{opened[0]}: a fenced block is never closed"
    return found


ALL = [snippet for path in FILES for snippet in snippets(path)]


def _files(device: bool) -> list:
    """One pytest param per file with blocks to run (device: per file with gpu/nvfuser-marked blocks)."""
    params = []
    for path in FILES:
        blocks = [s for s in snippets(path) if s.language in RUN]
        marked = {s.kind for s in blocks} & DEVICE_MARKERS
        if device and marked:
            marks = [getattr(pytest.mark, marker) for marker in sorted(marked)]
            params.append(pytest.param(path, marks=marks, id=path.name))
        elif not device and any(s.kind in (None, "file") for s in blocks):
            params.append(pytest.param(path, id=path.name))
    return params


def block_problems(blocks: list[Snippet]) -> list[str]:
    """Why each block that cannot be run cannot: an unknown language or marker, a misplaced
    marker, a command that is not `fusebench` or `pytest`."""
    problems = []
    for snippet in blocks:
        if snippet.language not in RUN | DIAGRAMS:
            problems.append(f"{snippet.where}: ```{snippet.language}: no runner for this language ({sorted(RUN)})")
        if snippet.kind is not None and snippet.kind not in MARKERS:
            problems.append(f"{snippet.where}: unknown marker <!-- {snippet.marker} --> (known: {sorted(MARKERS)})")
        if snippet.kind in ("setup", "ci") and snippet.language != "bash":
            problems.append(f"{snippet.where}: <!-- {snippet.marker} --> marks bash blocks only")
        if snippet.kind == "file" and (snippet.language != "python" or not snippet.target):
            problems.append(f"{snippet.where}: <!-- file: PATH --> marks python blocks only, with a path")
        if snippet.kind == "setup" and snippet.path.name != "README.md":
            problems.append(f"{snippet.where}: set-up commands belong in README.md (test_readme checks them)")
        if snippet.language == "bash" and snippet.kind not in ("setup", "ci"):
            for command in commands(snippet):
                if not command.startswith(COMMANDS):
                    problems.append(f"{snippet.where}: `{command}`: expected a command starting with {COMMANDS}")
    return problems


def test_every_block_can_be_run() -> None:
    problems = block_problems(ALL)
    assert not problems, "\n".join(problems)
    assert any(s.language == "python" for s in ALL) and any(s.language == "bash" for s in ALL)


def test_a_block_no_runner_knows_fails(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```\nplain\n```\n"
        "```text\noutput\n```\n"
        "<!-- someday -->\n```python\nx = 1\n```\n"
        "```bash\nls -la\nfusebench list\n```\n"
        "<!-- file: a.py -->\n```bash\nfusebench list\n```\n"
        "```mermaid\nflowchart TD\n```\n"
    )
    problems = block_problems(snippets(page))
    expected = ["```: no runner", "```text: no runner", "<!-- someday -->", "`ls -la`", "<!-- file: PATH -->"]
    assert len(problems) == len(expected) and all(e in p for e, p in zip(expected, problems)), problems


def commands(snippet: Snippet) -> list[str]:
    """The block's commands: its lines with `\\` continuations joined, blank and comment lines dropped."""
    joined = re.sub(r"\\\n\s*", " ", snippet.body)
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]


# ---------------------------------------------------------------------------------------------
# Running a file's blocks


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True)


def _commit(repo: Path, message: str) -> None:
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=fusebench tests", "-c", "user.email=tests@fusebench.invalid", "commit", "-qm", message)


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git repository of the current tree (commit 'baseline'), plus a commit that touches no code."""
    repo = tmp_path_factory.mktemp("snippets") / "repo"
    repo.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in ("compiler", "fusebench", "suites"):
        shutil.copytree(ROOT / package, repo / package, ignore=ignore)
    for name in ("pyproject.toml", "asv.conf.json"):
        shutil.copy(ROOT / name, repo / name)
    (repo / ".gitignore").write_text("results/\nreport.html\n*.md\n")
    _git(repo, "init", "-q", "-b", "main")
    _commit(repo, "baseline")
    (repo / "CHANGES.txt").write_text("a commit that changes no code\n")
    _commit(repo, "notes")
    return repo


def _run_command(snippet: Snippet, command: str, capsys: pytest.CaptureFixture) -> None:
    """Runs one command in the working folder: `fusebench ...` in this process, others in a subprocess."""
    words = shlex.split(command)
    if words[0] == "fusebench":
        capsys.readouterr()
        status = main(words[1:])
        out, err = capsys.readouterr()
    else:
        # NOTE: without the PYTEST_XDIST_* variables of the xdist worker running this test, which
        # make pytest-benchmark disable itself in the child (a usage error with --benchmark-only).
        env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_XDIST")}
        result = subprocess.run(words, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False, env=env)
        status, out, err = result.returncode, result.stdout, result.stderr
    # NOTE: compare exits 1 when a row is slower at B, which noise may cause; never for a failure
    slower_at_b = words[:2] == ["fusebench", "compare"] and status == 1 and "slower" in out and "failed" not in out
    assert status == 0 or slower_at_b, f"{snippet.where}: `{command}` exited {status}\n{out}\n{err}"


def _run_blocks(
    path: Path,
    device: bool,
    repo: Path,
    cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    """Runs `path`'s blocks in order in `repo`: the unmarked ones, and with `device` the Python
    blocks again with the device-marked ones among them, and the device-marked commands."""
    monkeypatch.chdir(repo)
    monkeypatch.setenv("FUSEBENCH_CACHE_DIR", str(cache))
    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    namespace: dict = {"__name__": f"snippets_of_{path.stem}"}
    for snippet in snippets(path):
        if snippet.kind == "file":
            target = repo / snippet.target
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(snippet.body)
        elif snippet.language == "python" and (snippet.kind is None or (device and snippet.kind in DEVICE_MARKERS)):
            exec(compile(snippet.body, snippet.where, "exec"), namespace)
        elif snippet.language == "bash" and (snippet.kind in DEVICE_MARKERS if device else snippet.kind is None):
            for command in commands(snippet):
                _run_command(snippet, command, capsys)


@pytest.mark.parametrize("path", _files(device=False))
def test_blocks_run(
    path: Path, repository: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    _run_blocks(path, False, repository, tmp_path, monkeypatch, capsys)


@pytest.mark.parametrize("path", _files(device=True))
def test_gpu_blocks_run(
    path: Path, repository: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    _run_blocks(path, True, repository, tmp_path, monkeypatch, capsys)


def _ci_commands() -> list[list[str]]:
    """The commands of `.ci/run`, as argument lists, with its own machine name (`--machine ci`) left out."""
    text = re.sub(r"\\\n\s*", " ", (ROOT / ".ci" / "run").read_text())
    found = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            words = shlex.split(line, comments=True)
            while "--machine" in words:
                at = words.index("--machine")
                del words[at : at + 2]
            found.append(words)
    return found


def test_ci_blocks_are_what_ci_runs() -> None:
    ran = _ci_commands()
    blocks = [s for s in ALL if s.kind == "ci"]
    for snippet in blocks:
        for command in commands(snippet):
            assert shlex.split(command) in ran, f"{snippet.where}: `{command}` is not a command of .ci/run"
