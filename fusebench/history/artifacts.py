"""Where the compiler's record of each measurement is kept: small text files next to the ASV results.

Layout (outside ASV's JSON; no file ends in `.json`, since ASV reads every one under results/):
    <results>/<machine>/artifacts/<commit[:8]>/<suite>.<case>/<params id>/<variant id>/
        record.json.txt   the facts as data, plus the measurement's metrics under "measurement"
        trace.py, fusions.txt, fusions/<name>.py, segments.txt, ...   (see fusebench.measure.compiler_record)
A folder is replaced whole and atomically (written beside it, then renamed), so a reader never
sees half of one, and a later round of the same commit replaces an earlier one.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

from fusebench.cases.case import format_params
from fusebench.history.results import RunInfo
from fusebench.measure.compiler_record import RECORD_FILE
from fusebench.measure.outcome import Outcome

ARTIFACTS = "artifacts"
_MAX_ID = 80


def file_id(text: str) -> str:
    """`text` as a file name: runs of other characters than letters, digits, `.`, `=`, `-` become `_`."""
    slug = re.sub(r"[^\w.=-]+", "_", text).strip("_") or "_"
    if len(slug) <= _MAX_ID:
        return slug
    return f"{slug[: _MAX_ID - 9]}-{hashlib.sha1(text.encode()).hexdigest()[:8]}"


def artifacts_dir(
    results_dir: str | Path, machine: str, commit: str, suite: str, case: str, params: str, variant: str
) -> Path:
    """The folder of one measurement's record; `params` as `format_params` writes them (and histories hold them)."""
    params_id = file_id(params) if params else "no_params"
    return Path(results_dir) / machine / ARTIFACTS / commit[:8] / f"{suite}.{case}" / params_id / file_id(variant)


def write_artifacts(results_dir: str | Path, run: RunInfo, outcome: Outcome) -> Path | None:
    """Writes `outcome.artifacts` (with its metrics added to the record); None when it has none."""
    if not outcome.artifacts:
        return None
    machine, commit = run.machine.machine, run.revision.commit
    case, params, variant = outcome.case, format_params(outcome.params), outcome.variant
    directory = artifacts_dir(results_dir, machine, commit, outcome.suite, case, params, variant)
    files = dict(outcome.artifacts)
    record = json.loads(files.get(RECORD_FILE, "{}"))
    record["measurement"] = measurement(outcome)
    files[RECORD_FILE] = json.dumps(record, indent=1, sort_keys=True) + "\n"
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = directory.with_name(f".{directory.name}.{os.getpid()}.new")
    shutil.rmtree(staging, ignore_errors=True)
    for name, text in files.items():
        path = staging / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    old = directory.with_name(f".{directory.name}.{os.getpid()}.old")
    if directory.exists():
        os.replace(directory, old)
    os.replace(staging, directory)
    shutil.rmtree(old, ignore_errors=True)
    return directory


def read_artifacts(directory: str | Path) -> dict[str, str]:
    """Every file of a record folder by relative name ({} when the folder does not exist)."""
    directory = Path(directory)
    if not directory.is_dir():
        return {}
    return {
        path.relative_to(directory).as_posix(): path.read_text(errors="replace")
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def read_record(files: dict[str, str]) -> dict[str, Any]:
    """The structured part of a record folder's files ({} without one)."""
    return json.loads(files[RECORD_FILE]) if RECORD_FILE in files else {}


def measurement(outcome: Outcome) -> dict[str, Any]:
    """The metrics of `outcome` that explain a change (median seconds, compile time, counts, status)."""
    return {
        "status": outcome.status,
        "detail": outcome.detail,
        "median_s": outcome.timing.median if outcome.timing else None,
        "compile_seconds": outcome.compile_seconds,
        "recompilations": outcome.recompilations,
        "kernels_per_call": outcome.kernels_per_call,
        "fusions_per_call": outcome.fusions_per_call,
        "fusions_backward": outcome.fusions_backward,
        "peak_device_bytes": outcome.peak_device_bytes,
    }
