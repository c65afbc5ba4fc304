"""The README and the guides stay true: the set-up commands are what CI runs, the README stays a
short guide, prose holds no measurements or commit hashes, links resolve, and the table's columns
are the ones documented. (Every code block is run by tests/harness/test_docs_snippets.py.)"""

from __future__ import annotations

import re
from pathlib import Path

from fusebench.compare.comparison import HEADERS as COMPARE_HEADERS
from fusebench.report.table import HEADERS as TABLE_HEADERS
from tests.harness.test_docs_snippets import FILES, ROOT, snippets

README = ROOT / "README.md"
MAX_README_LINES = 300
# NOTE: a number with a unit of time or bandwidth in prose is a measurement; so is a hex word of
# seven or more digits with a letter in it (a commit hash)
MEASURED = re.compile(r"\b\d+(?:\.\d+)?\s?(?:ns|µs|us|ms|s|GB/s|TB/s|kernels)\b(?![-\w])")
HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")


def prose(path: Path) -> str:
    """`path`'s text without its fenced blocks and inline code."""
    outside, inside = [], False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            inside = not inside
        elif not inside:
            outside.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(outside)


def test_ci_runs_the_readme_commands() -> None:
    setup = [s for s in snippets(README) if s.marker == "setup"]
    commands = [line for block in setup for line in block.body.splitlines() if line.strip()]
    main_command, test_command = commands
    assert main_command == "pip install torch==2.13.0 && pip install -e . && fusebench run"
    assert test_command in (ROOT / ".ci" / "run").read_text().splitlines()


def test_the_readme_is_a_short_guide() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; keep it to {MAX_README_LINES}"
    headings = ("## Set-up", "## A five-minute tour on CPU", "## The compiler in one minute", "## Where to go next")
    for heading in headings:
        assert heading in lines, heading


def test_prose_holds_no_measurements_or_commit_hashes() -> None:
    problems = []
    for path in FILES:
        for line in prose(path).splitlines():
            for pattern, what in ((MEASURED, "a measurement"), (HASH, "a commit hash")):
                if match := pattern.search(line):
                    problems.append(f"{path.name}: {what} {match.group(0)!r} in: {line.strip()}")
    assert not problems, "generate numbers with `fusebench report --markdown`:\n" + "\n".join(problems)


def test_relative_links_resolve() -> None:
    problems = []
    for path in FILES:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text()):
            if not re.match(r"[a-z]+:", target) and not (path.parent / target).exists():
                problems.append(f"{path.relative_to(ROOT)}: link to {target} does not resolve")
    assert not problems, "\n".join(problems)


def test_the_guides_define_every_column_of_the_tables() -> None:
    harness = (ROOT / "docs" / "harness.md").read_text()
    for column in TABLE_HEADERS[3:] + COMPARE_HEADERS[3:]:
        assert f"- `{column}`" in harness, f"docs/harness.md does not define the column {column!r}"
