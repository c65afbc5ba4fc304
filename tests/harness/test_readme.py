"""The README stays true: its test command is what CI runs, its example suite works, its table is current."""

from __future__ import annotations

from pathlib import Path

import torch

from fusebench.cases.discovery import discover_folder
from fusebench.cases.variants import EAGER
from fusebench.measure.measure import Settings, measure_variant, prepare_case
from fusebench.report.summary import headline
from fusebench.report.table import render

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def code_blocks(language: str) -> list[str]:
    """The bodies of the README's fenced blocks opened with ```<language>."""
    blocks, current, opened_with = [], None, None
    for line in README.splitlines():
        if line.startswith("```") and current is None:
            current, opened_with = [], line[3:].strip()
        elif line.startswith("```"):
            if opened_with == language:
                blocks.append("\n".join(current) + "\n")
            current = None
        elif current is not None:
            current.append(line)
    return blocks


def test_ci_runs_the_readme_commands() -> None:
    commands = [line for block in code_blocks("bash") for line in block.splitlines() if line.startswith("pip ")]
    main_command, test_command = commands[:2]
    assert main_command == "pip install torch==2.13.0 && pip install -e . && fusebench run"
    assert test_command in (ROOT / ".ci" / "run").read_text().splitlines()


def test_the_readme_example_suite_runs(tmp_path: Path) -> None:
    (example,) = [block for block in code_blocks("python") if "CASES = [" in block]
    (tmp_path / "my_suite.py").write_text(example)
    (suite,) = discover_folder(tmp_path)
    (case,) = suite.cases
    settings = Settings(device=torch.device("cpu"), budget_s=0.01)
    outcome = measure_variant(prepare_case(suite.name, case, case.grid(quick=True)[0], settings), EAGER, settings)
    assert outcome.status == "ok", outcome.detail
    assert outcome.bytes_moved == 3 * 4 * 65536


def test_the_readme_table_has_the_current_columns() -> None:
    outputs = [block for block in code_blocks("") if block.startswith("$ OMP_NUM_THREADS=1 fusebench run")]
    assert len(outputs) == 2  # the default run, and the run the scoreboard section shows
    for output in outputs:
        readme_header = output.splitlines()[1]
        assert readme_header.split() == render([]).splitlines()[0].split()


def test_the_readme_summary_is_what_fusebench_run_prints() -> None:
    (output,) = [block for block in code_blocks("") if "fusebench vs best peer (" in block]
    (readme_headline,) = [line for line in output.splitlines() if line.startswith("fusebench vs best peer (")]
    prefix = headline([]).split(": ")[0]
    assert readme_headline.startswith(prefix + ": ") and "geometric mean" in readme_headline
