"""Results folders from several machines or shards merged into one, for `fusebench report` and
`asv publish` (which reads one results folder).

`fusebench run --shard I/N` on N machines (a CI matrix, a fleet) leaves N results folders; where
the machines have different names their files never collide and merging copies them, and where
they share one (`--machine ci-h100`) each has its own file of the same commit and environment,
holding its share of the benchmarks: those are merged point by point
(`fusebench.history.results.merge_result_file`). The machine's description and the compiler
records (`fusebench.history.artifacts`) are copied beside them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from fusebench.errors import ResultsError, check
from fusebench.files import file_lock
from fusebench.history.artifacts import ARTIFACTS
from fusebench.history.machine_file import ASV_MACHINE_FILE, FACTS_FILE, restore_machine_facts
from fusebench.history.results import LOCK_FILE, merge_result_file


def merge_results(source_dir: str | Path, results_dir: str | Path) -> list[Path]:
    """Merges every machine of the results folder `source_dir` into `results_dir`; returns the
    result files written."""
    source_dir, results_dir = Path(source_dir), Path(results_dir)
    check(source_dir.is_dir(), lambda: f"{source_dir}: no such results folder", ResultsError)
    check(
        source_dir.resolve() != results_dir.resolve(),
        lambda: f"{source_dir}: is the results folder itself; name another folder to merge",
        ResultsError,
    )
    written = []
    with file_lock(results_dir / LOCK_FILE):
        for machine_json in sorted(source_dir.glob(f"*/{ASV_MACHINE_FILE}")):
            source_machine = machine_json.parent
            target_machine = results_dir / source_machine.name
            for path in sorted(source_machine.glob("*.json")):
                if path.name != ASV_MACHINE_FILE:
                    written.append(merge_result_file(path, target_machine / path.name))
            for name in (ASV_MACHINE_FILE, FACTS_FILE):
                if (source_machine / name).exists() and not (target_machine / name).exists():
                    shutil.copy2(source_machine / name, target_machine / name)
            if (source_machine / ARTIFACTS).is_dir():
                shutil.copytree(source_machine / ARTIFACTS, target_machine / ARTIFACTS, dirs_exist_ok=True)
        restore_machine_facts(results_dir)
    return written
