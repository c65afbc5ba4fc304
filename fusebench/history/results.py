"""Results in ASV's result-file format (asv 0.6), and read back into a pandas DataFrame.

Layout under the results folder, as `asv run` writes it (so `asv publish` and `asv compare` read it):
    benchmarks.json                       {name: {name, type, unit, params, param_names, version, ...}, "version": 2}
    <machine>/machine.json                {machine, os, arch, cpu, num_cpu, ram, ..., "version": 1}
    <machine>/machine.fusebench           fusebench's machine facts, which `asv run` drops from
                                          machine.json (`fusebench.history.machine_file`)
    <machine>/<commit[:8]>-<env>.json     one file per commit and environment ("version": 2):
        {commit_hash, env_name, date, params, python, requirements, env_vars, durations,
         result_columns: [result, params, version, started_at, duration, stats_ci_99_a, stats_ci_99_b,
                          stats_q_25, stats_q_75, stats_number, stats_repeat, samples, profile],
         results: {benchmark name: [one value per column, trailing nulls dropped]}}
A parametrized benchmark's `result` is a flat list over itertools.product(*params), params being
lists of `repr`s, each in natural order ('4' before '16'), whatever order the measurements came in
(several workers' results land in the order they finish: the file is the same either way).
fusebench records every metric as a benchmark '<suite>.<case>.<metric>' whose last parameter
is `variant`, and adds a top-level "fusebench" key (ASV ignores unknown keys) with each
measurement's status and reason and the parameter names.

Writes merge into the existing file of the same commit and environment and are atomic; processes
take turns through the lock file `<results>/.fusebench.lock` (several GPUs' workers share one file).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from fusebench.errors import ResultsError
from fusebench.files import atomic_write_json, file_lock, read_json
from fusebench.history.machine_file import write_machine_files
from fusebench.history.revision import Revision
from fusebench.measure.machine import MachineInfo
from fusebench.measure.outcome import (
    METRICS_BY_NAME,
    TIME,
    Metric,
    Outcome,
    benchmark_name,
    benchmark_version,
    split_benchmark_name,
)

RESULTS_API_VERSION = 2
LOCK_FILE = ".fusebench.lock"
BENCHMARKS_API_VERSION = 2
RESULT_COLUMNS = [
    "result",
    "params",
    "version",
    "started_at",
    "duration",
    "stats_ci_99_a",
    "stats_ci_99_b",
    "stats_q_25",
    "stats_q_75",
    "stats_number",
    "stats_repeat",
    "samples",
    "profile",
]
_STATS_KEYS = ["ci_99_a", "ci_99_b", "q_25", "q_75", "number", "repeat"]
DATAFRAME_COLUMNS = [
    "machine",
    "env",
    "commit",
    "date",
    "suite",
    "case",
    "params",
    "variant",
    "metric",
    "unit",
    "value",
    "status",
    "detail",
    "q25",
    "q75",
    "min",
    "repeats",
    "samples",
    "benchmark",
    "paired",  # time rows: other variant -> {"ratio", "spread", "pairs"} timed alternately with it, or None
]


@dataclass(frozen=True)
class RunInfo:
    """Where results go: the machine, the revision measured and the environment name."""

    machine: MachineInfo
    revision: Revision
    env_name: str


@dataclass
class _Point:
    value: float | int | None
    stats: dict[str, Any] | None = None
    samples: list[float] | None = None
    started_at: int | None = None
    duration: float | None = None


@dataclass
class _Benchmark:
    param_names: list[str]
    version: str
    points: dict[tuple[str, ...], _Point] = field(default_factory=dict)


def result_path(results_dir: Path, run: RunInfo) -> Path:
    """results/<machine>/<commit[:8]>-<env>.json, as asv names result files."""
    return Path(results_dir) / run.machine.machine / f"{run.revision.commit[:8]}-{run.env_name}.json"


def write_outcomes(results_dir: str | Path, run: RunInfo, outcomes: Sequence[Outcome]) -> Path:
    """Merges `outcomes` into the run's result file, then updates machine.json and benchmarks.json."""
    results_dir = Path(results_dir)
    with file_lock(results_dir / LOCK_FILE):
        return _write_outcomes(results_dir, run, outcomes)


def _write_outcomes(results_dir: Path, run: RunInfo, outcomes: Sequence[Outcome]) -> Path:
    # NOTE: only the benchmarks of `outcomes` are parsed and rebuilt; the others' rows are kept as
    # they are, so the cost of a write does not grow with the benchmarks already in the file.
    path = result_path(results_dir, run)
    touched = {benchmark_name(o.suite, o.case, METRICS_BY_NAME[m]) for o in outcomes for m in o.metric_values()}
    document = _load_document(path) if path.exists() else None
    kept: dict[str, Any] = {}
    if document is not None and document.get("result_columns") == RESULT_COLUMNS:
        kept = {name: row for name, row in document["results"].items() if name not in touched}
        benchmarks, statuses = _parse(document, only=touched)
        kept_names = document.get("fusebench", {}).get("param_names", {})
        kept_names = {name: names for name, names in kept_names.items() if name in kept}
    else:
        benchmarks, statuses = _parse(document) if document else ({}, {})
        kept_names = {}
    for outcome in outcomes:
        _add_outcome(benchmarks, statuses, outcome)
    atomic_write_json(path, _document(run, benchmarks, statuses, kept, kept_names))
    write_machine_files(path.parent, run.machine)
    _update_benchmarks_json(results_dir / "benchmarks.json", {n: b for n, b in benchmarks.items() if n in touched})
    return path


def merge_result_file(source: str | Path, target: str | Path) -> Path:
    """Merges the result file `source` into `target` (same machine, commit and environment; created
    when missing) as if its measurements had been written there: the combinations `source` measured
    replace those of `target`, the others stay; benchmarks.json beside `target`'s machine folder is
    widened. The caller holds the results folder's lock (`LOCK_FILE`)."""
    source, target = Path(source), Path(target)
    incoming = _load_document(source)
    benchmarks, statuses = _parse(_load_document(target)) if target.exists() else ({}, {})
    new_benchmarks, new_statuses = _parse(incoming)
    for name, benchmark in new_benchmarks.items():
        current = benchmarks.get(name)
        if current is None or (current.param_names, current.version) != (benchmark.param_names, benchmark.version):
            current = benchmarks[name] = _Benchmark(benchmark.param_names, benchmark.version)
        case = name.rsplit(".", 1)[0]
        for combo, point in benchmark.points.items():
            if (case, combo) in new_statuses or combo not in current.points:
                current.points[combo] = point
    statuses.update(new_statuses)
    extras = incoming.get("fusebench", {})
    revision = Revision(incoming["commit_hash"], incoming.get("date") or 0, bool(extras.get("dirty", False)))
    fields = {key: str(incoming["params"].get(key, "")) for key in MachineInfo.__dataclass_fields__}
    run = RunInfo(MachineInfo(**fields), revision, incoming["env_name"])
    atomic_write_json(target, _document(run, benchmarks, statuses))
    _update_benchmarks_json(target.parent.parent / "benchmarks.json", benchmarks)
    return target


def read_results(results_dir: str | Path) -> pd.DataFrame:
    """Every result file under `results_dir` as one DataFrame (see `read_result_file`)."""
    results_dir = Path(results_dir)
    descriptions = _read_benchmarks_json(results_dir / "benchmarks.json")
    frames = [
        read_result_file(path, descriptions)
        for machine_json in sorted(results_dir.glob("*/machine.json"))
        for path in sorted(machine_json.parent.glob("*.json"))
        if path.name != "machine.json"
    ]
    frames = [frame for frame in frames if not frame.empty]
    if not frames:
        return pd.DataFrame(columns=DATAFRAME_COLUMNS)
    return pd.concat(frames, ignore_index=True)


def read_result_file(path: str | Path, descriptions: dict[str, Any] | None = None) -> pd.DataFrame:
    """One row per (case, params, variant, metric) of an ASV result file written by fusebench (or by
    asv for benchmarks named '<suite>.<case>.<metric>' with a last parameter `variant`; their
    parameter names then come from `descriptions`, the benchmarks.json entries)."""
    document = _load_document(Path(path))
    benchmarks, statuses = _parse(document, descriptions or {})
    machine = document.get("params", {}).get("machine", Path(path).parent.name)
    rows = []
    for name, benchmark in benchmarks.items():
        suite, case, metric = split_benchmark_name(name)
        for combo, point in benchmark.points.items():
            *param_reprs, variant_repr = combo
            entry = statuses.get((f"{suite}.{case}", combo), {})
            status = entry.get("status", "ok" if point.value is not None else "missing")
            samples = point.samples if metric is TIME else None
            rows.append(
                {
                    "machine": machine,
                    "env": document.get("env_name"),
                    "commit": document.get("commit_hash"),
                    "date": document.get("date"),
                    "suite": suite,
                    "case": case,
                    "params": ", ".join(f"{n}={r}" for n, r in zip(benchmark.param_names, param_reprs)),
                    "variant": _unrepr(variant_repr),
                    "metric": metric.name,
                    "unit": metric.unit,
                    "value": math.nan if point.value is None else point.value,
                    "status": status,
                    "detail": entry.get("detail", ""),
                    "q25": (point.stats or {}).get("q_25"),
                    "q75": (point.stats or {}).get("q_75"),
                    "min": min(samples) if samples else None,
                    "repeats": (point.stats or {}).get("repeat"),
                    "samples": samples,
                    "benchmark": name,
                    "paired": entry.get("paired") if metric is TIME else None,
                }
            )
    return pd.DataFrame(rows, columns=DATAFRAME_COLUMNS)


# --------------------------------------------------------------------------------------------
# outcomes -> points


def _add_outcome(benchmarks: dict[str, _Benchmark], statuses: dict, outcome: Outcome) -> None:
    combo = (*(repr(v) for v in outcome.params.values()), repr(outcome.variant))
    param_names = [*outcome.params, "variant"]
    version = benchmark_version(outcome.case_version)
    values = outcome.metric_values()
    for metric_name, value in values.items():
        name = benchmark_name(outcome.suite, outcome.case, METRICS_BY_NAME[metric_name])
        benchmark = benchmarks.get(name)
        if benchmark is None or benchmark.param_names != param_names or benchmark.version != version:
            # NOTE: a changed parameter list or version is a different benchmark to ASV: start afresh.
            benchmark = benchmarks[name] = _Benchmark(param_names, version)
        point = _Point(value, started_at=int(outcome.started_at * 1000), duration=outcome.duration)
        if metric_name == TIME.name and value is not None and outcome.timing is not None:
            point.stats, point.samples = _time_stats(outcome), list(outcome.timing.samples)
        benchmark.points[combo] = point
    entry = {"status": outcome.status, "detail": outcome.detail}
    if outcome.extra.get("paired"):
        entry["paired"] = outcome.extra["paired"]
    statuses[(f"{outcome.suite}.{outcome.case}", combo)] = entry


def _time_stats(outcome: Outcome) -> dict[str, Any]:
    from asv_runner.statistics import compute_stats  # NOTE: ASV's own CI, which `asv compare` reads

    assert outcome.timing is not None
    _, stats = compute_stats(list(outcome.timing.samples), outcome.calls_per_sample)
    stats["q_25"], stats["q_75"] = outcome.timing.q25, outcome.timing.q75
    return stats


# --------------------------------------------------------------------------------------------
# points <-> ASV documents


def _document(
    run: RunInfo,
    benchmarks: dict[str, _Benchmark],
    statuses: dict,
    kept_rows: dict[str, list] | None = None,
    kept_param_names: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """The result document of `benchmarks`, plus rows (and their parameter names) kept verbatim."""
    python = ".".join(run.machine.python.split(".")[:2])
    rows = {**(kept_rows or {}), **{name: _result_row(benchmark) for name, benchmark in benchmarks.items()}}
    results = dict(sorted(rows.items()))
    param_names = {**(kept_param_names or {}), **{name: b.param_names for name, b in benchmarks.items()}}
    return {
        "commit_hash": run.revision.commit,
        "env_name": run.env_name,
        "date": run.revision.date_ms,
        "params": {**run.machine.as_json(), "python": python},
        "python": python,
        "requirements": {"torch": run.machine.torch},
        "env_vars": {},
        "result_columns": RESULT_COLUMNS,
        "results": results,
        "durations": {},
        "version": RESULTS_API_VERSION,
        "fusebench": {
            "param_names": dict(sorted(param_names.items())),
            "outcomes": [
                {"case": case, "params": list(combo), **entry} for (case, combo), entry in sorted(statuses.items())
            ],
            "dirty": run.revision.dirty,
        },
    }


def _axes(combos: Any, axes: list[list[str]]) -> list[list[str]]:
    """`axes` widened by the values of `combos`, each axis in natural order."""
    values = [set(axis) for axis in axes]
    for combo in combos:
        for axis, value in zip(values, combo):
            axis.add(value)
    return [sorted(axis, key=_natural) for axis in values]


def _natural(text: str) -> list[Any]:
    """Sort key: runs of digits compare as numbers ("(4, 64)" before "(16, 512)", 'x2' before 'x10')."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", text)]


def _result_row(benchmark: _Benchmark) -> list[Any]:
    axes = _axes(benchmark.points, [[] for _ in benchmark.param_names])
    points = [benchmark.points.get(combo) for combo in itertools.product(*axes)]
    stats = [p.stats if p else None for p in points]
    started = [p.started_at for p in points if p and p.started_at is not None]
    columns = {
        "result": [p.value if p else None for p in points],
        "params": axes,
        "version": benchmark.version,
        "started_at": min(started) if started else None,
        "duration": sum(p.duration or 0.0 for p in points if p),
        **{f"stats_{key}": [s.get(key) if s else None for s in stats] for key in _STATS_KEYS},
        "samples": [p.samples if p else None for p in points],
        "profile": None,
    }
    row = [None if _all_none(columns[c]) and c != "params" else columns[c] for c in RESULT_COLUMNS]
    while row and row[-1] is None:
        row.pop()
    return row


def _parse(
    document: dict[str, Any], descriptions: dict[str, Any] | None = None, only: set[str] | None = None
) -> tuple[dict, dict]:
    """Benchmarks (points by parameter combination) and statuses from a result document (only the
    benchmarks named in `only`, when given)."""
    extras = document.get("fusebench", {})
    names_by_benchmark = extras.get("param_names", {})
    columns = document["result_columns"]
    benchmarks: dict[str, _Benchmark] = {}
    for name, row in document["results"].items():
        if only is not None and name not in only:
            continue
        try:
            split_benchmark_name(name)
        except ValueError:
            continue  # NOTE: not a fusebench metric (another tool's benchmark in the same file)
        data = dict(zip(columns, row))
        axes = data.get("params") or []
        param_names = names_by_benchmark.get(name) or (descriptions or {}).get(name, {}).get("param_names")
        if not param_names or len(param_names) != len(axes):
            param_names = [f"param{i}" for i in range(len(axes) - 1)] + ["variant"]
        benchmark = benchmarks[name] = _Benchmark(list(param_names), str(data.get("version")))
        combos = list(itertools.product(*axes))
        for key in ("result", "samples", *(f"stats_{k}" for k in _STATS_KEYS)):
            data[key] = data.get(key) or [None] * len(combos)
        for i, combo in enumerate(combos):
            stats = {k: data[f"stats_{k}"][i] for k in _STATS_KEYS if data[f"stats_{k}"][i] is not None}
            benchmark.points[combo] = _Point(
                data["result"][i], stats or None, data["samples"][i], data.get("started_at"), None
            )
    # (case, combo) -> {"status", "detail", "paired" (where the run timed it alternately with others)}
    statuses = {
        (entry["case"], tuple(entry["params"])): {k: v for k, v in entry.items() if k not in ("case", "params")}
        for entry in extras.get("outcomes", [])
    }
    return benchmarks, statuses


def _update_benchmarks_json(path: Path, benchmarks: dict[str, _Benchmark]) -> None:
    """Adds or widens the description of every benchmark in `benchmarks` (params: union of values)."""
    descriptions = _read_benchmarks_json(path)
    before = {name: dict(entry) for name, entry in descriptions.items()}
    for name, benchmark in benchmarks.items():
        metric = split_benchmark_name(name)[2]
        axes: list[list[str]] = [[] for _ in benchmark.param_names]
        old = descriptions.get(name)
        if old and old.get("param_names") == benchmark.param_names and old.get("version") == benchmark.version:
            axes = [list(axis) for axis in old["params"]]
        axes = _axes(benchmark.points, axes)
        descriptions[name] = _description(name, metric, benchmark.param_names, axes, benchmark.version)
    if descriptions != before:
        atomic_write_json(path, {**descriptions, "version": BENCHMARKS_API_VERSION}, indent=4)


def _description(name: str, metric: Metric, param_names: list[str], axes: list[list[str]], version: str) -> dict:
    description = {
        "name": name,
        "type": metric.kind,
        "unit": metric.unit,
        "params": axes,
        "param_names": param_names,
        "version": version,
        "code": f"# recorded by `fusebench run`: metric {metric.name} of case {name.rsplit('.', 1)[0]}",
        "timeout": 60.0,
    }
    if metric.kind == "time":
        description.update(number=0, repeat=0, min_run_count=2, rounds=1, sample_time=0.01, warmup_time=-1)
    return description


def _read_benchmarks_json(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    document = _load_document(path)
    return {name: entry for name, entry in document.items() if name != "version"}


def _load_document(path: Path) -> dict[str, Any]:
    try:
        document = read_json(path)
    except (OSError, ValueError) as error:
        raise ResultsError(
            f"cannot read {path}: {error}. Expected an ASV JSON document; move the file away to start afresh."
        ) from error
    if not isinstance(document, dict):
        raise ResultsError(f"{path} holds a JSON {type(document).__name__}; expected an ASV JSON object")
    return document


def _all_none(values: Any) -> bool:
    return values is None or (isinstance(values, list) and all(v is None for v in values))


def _unrepr(text: str) -> str:
    """The string a `repr` of a string stands for ('\\'eager\\'' -> 'eager'); other text unchanged."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text
