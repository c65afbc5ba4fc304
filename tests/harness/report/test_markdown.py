"""The Markdown results page (`fusebench report --markdown`): facts, commit and tables per machine."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fusebench.cli import main
from fusebench.history.results import RunInfo, read_results, write_outcomes
from fusebench.history.revision import Revision
from fusebench.measure.machine import machine_info
from fusebench.measure.outcome import Outcome
from fusebench.measure.stats import summarize
from fusebench.report.markdown import markdown_page
from fusebench.report.table import format_seconds
from tests.support.histories import ENV, LATEST_RUN, write_history, write_latest_run


def section(page: str, machine: str) -> str:
    """The part of `page` under the heading of `machine`."""
    start = page.index(f"\n## {machine} · ")
    end = page.find("\n## ", start + 1)
    return page[start : end if end >= 0 else None]


def table_rows(text: str) -> list[list[str]]:
    """The cells of every Markdown table row of `text` (header and rule lines included)."""
    rows = [line.strip() for line in text.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", row[1:-1])] for row in rows]


def rows_by_case_and_variant(text: str) -> dict[tuple[str, str], list[str]]:
    """The result rows of `text` by (case, variant); a row with a blank case is of the case above."""
    found, case = {}, ""
    for row in table_rows(text):
        if len(row) < 4 or row[0] == "case":
            continue
        case = row[0] or case
        found[(case, row[2])] = row
    return found


def test_each_machine_gets_its_facts_commit_and_latest_tables(tmp_path: Path) -> None:
    latest_commit = write_latest_run(tmp_path, "vm")
    history = write_history(tmp_path)
    page = markdown_page(tmp_path)
    assert page.count("\n## ") == 2
    vm, other = section(page, "vm"), section(page, "history-machine")
    facts = json.loads((tmp_path / "vm" / "machine.json").read_text())
    assert f"| CPU | {facts['cpu']} |" in vm and f"| torch | {facts['torch']} |" in vm
    assert f"| CPU cores | {facts['num_cpu']} |" in vm
    assert f"commit `{latest_commit[:8]}`" in vm and f"commit `{history[-1][:8]}`" in other
    assert "fusebench vs best peer" in vm and "commit |" not in vm  # one commit: no commit column
    frame = read_results(tmp_path)
    times = frame[(frame.machine == "vm") & (frame.metric == "time_call")]
    rows = table_rows(vm)
    variants = [row[2] for row in rows if len(row) > 3 and row[2] in {v for _, v in LATEST_RUN}]
    assert variants == ["eager", "torch.compile", "fusebench", "fusebench-torch", "thunder"] * 2
    for (case, variant), expected in LATEST_RUN.items():
        (recorded,) = times[(times.case == case) & (times.variant == variant)].itertuples()
        row = rows_by_case_and_variant(vm)[(case, variant)]
        if isinstance(expected, float):
            assert row[3] == format_seconds(recorded.value), row
        else:
            status, reason = expected
            assert row[3] == f"{status}: " + reason.replace("<", "&lt;").replace(">", "&gt;"), row
    assert "<yet>" not in page  # a reason's angle brackets would vanish as an HTML tag


def test_a_section_measured_over_several_commits_says_which_commit_each_row_is_from(tmp_path: Path) -> None:
    older = write_history(tmp_path, commits=2)
    newer = "f" * 40
    run = RunInfo(machine_info("history-machine"), Revision(newer, 1_800_000_000_000, False), ENV)
    step = Outcome(
        "gelu_backward",
        "gelu_train",
        {"shape": (4, 64, 256), "dtype": "float32"},
        "fusebench",
        "cpu",
        "ok",
        timing=summarize([1e-3, 1.1e-3, 1.2e-3]),
        kernels_per_call=5,
        kernels_backward=3,
        fusions_per_call=1,
        fusions_backward=2,
        tokens_per_call=11,
    )
    write_outcomes(tmp_path, run, [step])
    page = section(markdown_page(tmp_path), "history-machine")
    assert f"2 commits, the newest commit `{newer[:8]}`" in page
    gelu = page[page.index("### gelu_backward") :]
    header = next(row for row in table_rows(gelu) if row[0] == "case")
    assert header[-2:] == ["tokens/s", "commit"]
    train = rows_by_case_and_variant(gelu)[("gelu_train", "fusebench")]
    assert train[header.index("kernels")] == "2+3" and train[header.index("fusions")] == "1+2"
    assert train[header.index("tokens/s")] == "10,000" and train[-1] == f"`{newer[:8]}`"
    from_older = [row for row in table_rows(page) if row[-1] == f"`{older[-1][:8]}`"]
    assert len(from_older) == 5  # gelu_bias_backward: 2 dtypes x (eager, fusebench); dynamic_split


def test_the_command_writes_the_page_and_names_a_missing_folder(tmp_path: Path, capsys) -> None:
    write_latest_run(tmp_path / "results", "vm")
    output = tmp_path / "page" / "RESULTS.md"
    assert main(["report", "--results", str(tmp_path / "results"), "--markdown", str(output)]) == 0
    assert output.read_text() == markdown_page(tmp_path / "results")
    assert capsys.readouterr().out.strip() == f"results page: {output}"
    assert not (tmp_path / "report.html").exists()
    assert main(["report", "--results", str(tmp_path / "nothing"), "--markdown", str(output)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"fusebench report: error: --results {tmp_path / 'nothing'}: no such folder")
    (tmp_path / "empty").mkdir()
    assert main(["report", "--results", str(tmp_path / "empty"), "--markdown", str(output)]) == 2
    assert "no results to show" in capsys.readouterr().err


@pytest.mark.parametrize("reason", ["a | b", "line\nbreak"])
def test_a_reason_cannot_break_the_table(tmp_path: Path, reason: str) -> None:
    run = RunInfo(machine_info("m"), Revision("a" * 40, 1_700_000_000_000, False), ENV)
    write_outcomes(tmp_path, run, [Outcome("s", "c", {"n": 1}, "eager", "cpu", "error", reason)])
    (row,) = [row for row in table_rows(markdown_page(tmp_path)) if row[0] == "c"]
    assert len(row) == 11 and row[3].startswith("error: ")


def test_the_pages_tables_have_the_run_tables_columns(tmp_path: Path) -> None:
    from fusebench.report.table import HEADERS

    write_latest_run(tmp_path, "vm")
    headers = [row for row in table_rows(section(markdown_page(tmp_path), "vm")) if row[0] == "case"]
    assert headers and all(row[: len(HEADERS)] == HEADERS for row in headers)
