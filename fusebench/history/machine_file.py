"""A machine's description in the results folder, kept where ASV does not overwrite it.

ASV writes `<results>/<machine>/machine.json` itself (`asv run` saves the answers `asv machine`
stored in ~/.asv-machine.json: os, arch, cpu, num_cpu, ram) and so drops the facts fusebench adds
(gpu, gpu_driver, torch, cuda, nvfuser, python). fusebench therefore keeps its facts in a file of
its own beside it, `<results>/<machine>/machine.fusebench` (JSON, but not named `*.json`: ASV
loads every `*.json` under its results folder as a result file), and merges them back into
machine.json whenever it writes results or a report: ASV's fields stay, fusebench's are added.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fusebench.files import atomic_write_json, read_json
from fusebench.measure.machine import MachineInfo

MACHINE_API_VERSION = 1
FACTS_FILE = "machine.fusebench"
ASV_MACHINE_FILE = "machine.json"


def write_machine_files(machine_dir: str | Path, machine: MachineInfo) -> None:
    """Writes fusebench's facts file and machine.json (ASV's fields there kept, ours merged in)."""
    machine_dir = Path(machine_dir)
    facts = machine.as_json()
    # NOTE: rewritten only when changed: this runs after every measurement
    if _read_object(machine_dir / FACTS_FILE) != facts:
        atomic_write_json(machine_dir / FACTS_FILE, facts, indent=4)
    current = _read_object(machine_dir / ASV_MACHINE_FILE)
    if current != {**current, **facts, "version": MACHINE_API_VERSION}:
        _merge_into_machine_json(machine_dir, facts)


def machine_facts(machine_dir: str | Path) -> dict[str, Any]:
    """Everything known about the machine of `machine_dir`: machine.json's fields overlaid with
    fusebench's facts file (empty when neither exists or is readable)."""
    machine_dir = Path(machine_dir)
    facts = {k: v for k, v in _read_object(machine_dir / ASV_MACHINE_FILE).items() if k != "version"}
    return {**facts, **_read_object(machine_dir / FACTS_FILE)}


def restore_machine_facts(results_dir: str | Path) -> list[Path]:
    """Merges each machine's facts file back into its machine.json where ASV dropped them; returns
    the machine.json files it rewrote."""
    rewritten = []
    for facts_path in sorted(Path(results_dir).glob(f"*/{FACTS_FILE}")):
        facts = _read_object(facts_path)
        current = _read_object(facts_path.parent / ASV_MACHINE_FILE)
        if facts and any(current.get(key) != value for key, value in facts.items()):
            _merge_into_machine_json(facts_path.parent, facts)
            rewritten.append(facts_path.parent / ASV_MACHINE_FILE)
    return rewritten


def _merge_into_machine_json(machine_dir: Path, facts: dict[str, Any]) -> None:
    current = _read_object(machine_dir / ASV_MACHINE_FILE)
    atomic_write_json(machine_dir / ASV_MACHINE_FILE, {**current, **facts, "version": MACHINE_API_VERSION}, indent=4)


def _read_object(path: Path) -> dict[str, Any]:
    """The JSON object at `path`; {} when it is missing or not a JSON object (a file being replaced
    by another tool is not worth failing a run over: it is rewritten whole)."""
    try:
        document = read_json(path)
    except (OSError, ValueError):
        return {}
    return document if isinstance(document, dict) else {}
