"""Project hygiene: the README's two set-up commands, CI running the test one, and the line budget."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINE_BUDGET = 500


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    setup = text.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", setup, flags=re.S)


def test_readme_has_exactly_two_setup_commands_run_and_test() -> None:
    commands = _readme_commands()
    assert len(commands) == 2, commands
    run, test = commands
    assert "fusebench run" in run and "pip install" in run
    assert "pytest" in test and "pip install" in test


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    test_command = _readme_commands()[1]
    ci = (ROOT / ".ci" / "run").read_text()
    assert test_command in ci.splitlines()


def test_every_source_file_stays_within_the_line_budget() -> None:
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text().splitlines())
        for package in ("compiler", "fusebench", "suites", "scripts")
        for path in (ROOT / package).rglob("*.py")
    }
    over = {name: n for name, n in sizes.items() if n > LINE_BUDGET}
    print(f"\nsource lines: {sum(sizes.values())} in {len(sizes)} files (largest: {max(sizes.values())})")
    assert not over, f"files over {LINE_BUDGET} lines (split them by concept): {over}"
