"""fusebench's machine facts survive ASV rewriting machine.json; result files are readable like ASV's."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from asv.machine import Machine

from fusebench.files import read_json
from fusebench.history.machine_file import machine_facts, restore_machine_facts
from fusebench.history.results import RunInfo, result_path, write_outcomes
from fusebench.history.revision import Revision
from fusebench.measure.machine import machine_info
from fusebench.measure.outcome import Outcome
from fusebench.measure.stats import summarize

RUN = RunInfo(
    machine_info("test-machine"),
    Revision("0123456789abcdef0123456789abcdef01234567", 1_700_000_000_000, False),
    "fusebench-cpu-py3.11-torch2.13.0",
)


def outcome() -> Outcome:
    return Outcome("suite", "case", {"n": 4}, "eager", "cpu", "ok", timing=summarize([1e-3, 2e-3, 3e-3]))


def asv_saves_its_machine_json(results: Path, tmp_path: Path) -> None:
    """What `asv machine --yes` then `asv run` do: store ASV's answers and write them as machine.json."""
    asv_file = tmp_path / "asv-machine.json"
    machine = Machine.load(machine_name="test-machine", _path=str(asv_file), force_interactive=True, use_defaults=True)
    machine.machine = "test-machine"
    machine.save(str(results))


def test_asv_rewriting_machine_json_loses_no_fusebench_fact(tmp_path: Path) -> None:
    results = tmp_path / "results"
    write_outcomes(results, RUN, [outcome()])
    machine_dir = results / "test-machine"
    assert read_json(machine_dir / "machine.json")["torch"] == RUN.machine.torch
    asv_saves_its_machine_json(results, tmp_path)
    assert "torch" not in read_json(machine_dir / "machine.json")  # what ASV does to the file
    assert machine_facts(machine_dir)["torch"] == RUN.machine.torch
    assert machine_facts(machine_dir)["nvfuser"] == RUN.machine.nvfuser
    assert restore_machine_facts(results) == [machine_dir / "machine.json"]
    restored = read_json(machine_dir / "machine.json")
    assert restored["torch"] == RUN.machine.torch and restored["cuda"] == RUN.machine.cuda
    assert restored["version"] == 1 and "ram" in restored
    assert restore_machine_facts(results) == []  # nothing left to restore
    asv_saves_its_machine_json(results, tmp_path)
    write_outcomes(results, RUN, [outcome()])  # the next run merges them back too
    assert read_json(machine_dir / "machine.json")["gpu"] == RUN.machine.gpu


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_result_files_get_the_mode_a_new_file_gets_under_the_umask(tmp_path: Path, umask: int) -> None:
    previous = os.umask(umask)
    try:
        write_outcomes(tmp_path, RUN, [outcome()])
    finally:
        os.umask(previous)
    written = [
        result_path(tmp_path, RUN),
        tmp_path / "benchmarks.json",
        tmp_path / "test-machine" / "machine.json",
        tmp_path / "test-machine" / "machine.fusebench",
    ]
    for path in written:
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask, path
