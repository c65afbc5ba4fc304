"""Results through ASV's result-file format and back into pandas; merging; atomic writes."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from fusebench.errors import ResultsError
from fusebench.history.results import RunInfo, read_result_file, read_results, result_path, write_outcomes
from fusebench.history.revision import Revision
from fusebench.measure.machine import machine_info
from fusebench.measure.outcome import METRICS, Outcome
from fusebench.measure.stats import summarize

RUN = RunInfo(
    machine_info("test-machine"),
    Revision("0123456789abcdef0123456789abcdef01234567", 1_700_000_000_000, False),
    "fusebench-cpu-py3.11-torch2.13.0",
)


def ok(variant: str, dtype: str, samples: list[float], **fields) -> Outcome:
    defaults = dict(compile_seconds=0.5, recompilations=0, bytes_moved=1_000_000, peak_bandwidth_gbs=10.0)
    defaults.update(fields)
    return Outcome(
        suite="gelu_backward",
        case="gelu_bias_backward",
        params={"shape": (2, 8, 64), "dtype": dtype},
        variant=variant,
        device="cpu",
        status="ok",
        timing=summarize(samples),
        started_at=1_700_000_100.0,
        duration=0.25,
        **defaults,
    )


def not_ok(variant: str, status: str, detail: str) -> Outcome:
    return Outcome(
        suite="gelu_backward",
        case="gelu_bias_backward",
        params={"shape": (2, 8, 64), "dtype": "float32"},
        variant=variant,
        device="cpu",
        status=status,
        detail=detail,
    )


def test_round_trip_into_pandas_one_row_per_case_params_variant_metric(tmp_path: Path) -> None:
    outcomes = [
        ok("eager", "float32", [0.004, 0.002, 0.003]),
        ok("fusebench", "float32", [0.001, 0.001, 0.002], fusions_per_call=1, recompilations=2, fusions_backward=2),
        not_ok("thunder", "skipped", "lightning-thunder is not installed"),
    ]
    path = write_outcomes(tmp_path, RUN, outcomes)
    assert path == tmp_path / "test-machine" / "01234567-fusebench-cpu-py3.11-torch2.13.0.json"
    frame = read_results(tmp_path)
    assert len(frame) == 3 * len(METRICS)  # three measurements, every metric each
    assert not frame.duplicated(["case", "params", "variant", "metric"]).any()

    def cell(variant: str, metric: str, column: str = "value"):
        row = frame[(frame.variant == variant) & (frame.metric == metric)]
        assert len(row) == 1
        return row.iloc[0][column]

    assert cell("eager", "time_call") == 0.003
    assert (cell("eager", "time_call", "q25"), cell("eager", "time_call", "q75")) == (0.0025, 0.0035)
    assert cell("eager", "time_call", "min") == 0.002
    assert cell("eager", "time_call", "repeats") == 3
    assert cell("eager", "time_call", "samples") == [0.004, 0.002, 0.003]
    assert cell("fusebench", "track_bandwidth_gbs") == pytest.approx(1.0)  # 1 MB in 1 ms
    assert cell("fusebench", "track_peak_fraction") == pytest.approx(0.1)
    assert cell("fusebench", "track_recompilations") == 2
    assert cell("fusebench", "track_fusions_per_call") == 1
    assert cell("fusebench", "track_fusions_backward") == 2
    assert cell("thunder", "time_call", "status") == "skipped"
    assert cell("thunder", "time_call", "detail") == "lightning-thunder is not installed"
    assert pd_isnan(cell("thunder", "time_call"))
    row = frame.iloc[0]
    assert (row.machine, row.commit, row.suite, row.case) == (
        "test-machine",
        RUN.revision.commit,
        "gelu_backward",
        "gelu_bias_backward",
    )
    assert row.params == "shape=(2, 8, 64), dtype='float32'"


def pd_isnan(value) -> bool:
    return value != value


def test_asv_reads_the_files(tmp_path: Path) -> None:
    from asv.benchmarks import Benchmarks
    from asv.results import Results, iter_results

    write_outcomes(tmp_path, RUN, [ok("eager", "float32", [3.0, 1.0, 2.0]), ok("eager", "bfloat16", [5.0])])
    (loaded,) = list(iter_results(str(tmp_path)))  # finds machine.json and the result file
    name = "gelu_backward.gelu_bias_backward.time_call"
    params = loaded.get_result_params(name)
    assert params == [["(2, 8, 64)"], ["'bfloat16'", "'float32'"], ["'eager'"]]
    assert loaded.get_result_value(name, params) == [5.0, 2.0]
    assert loaded.get_result_samples(name, params) == [[5.0], [3.0, 1.0, 2.0]]
    assert loaded.get_result_stats(name, params)[1]["q_25"] == 1.5
    assert loaded.commit_hash == RUN.revision.commit and loaded.env_name == RUN.env_name
    conf = SimpleNamespace(results_dir=str(tmp_path), benchmark_dir="suites")
    benchmarks = Benchmarks.load(conf)
    assert benchmarks[name]["unit"] == "seconds" and benchmarks[name]["type"] == "time"
    assert benchmarks[name]["param_names"] == ["shape", "dtype", "variant"]
    assert benchmarks["gelu_backward.gelu_bias_backward.track_bandwidth_gbs"]["unit"] == "GB/s"
    assert name in loaded.get_result_keys(benchmarks)  # versions agree, so publish/compare use it
    assert Results.load(str(result_path(tmp_path, RUN))).get_result_value(name, params) == [5.0, 2.0]


def test_the_files_do_not_depend_on_the_order_measurements_arrive_in(tmp_path: Path) -> None:
    # several workers' results land in the order they finish
    combos = itertools.product(("torch.compile", "eager"), ("float32", "bfloat16"))
    outcomes = [ok(variant, dtype, [1.0 + i]) for i, (variant, dtype) in enumerate(combos)]
    first, second = tmp_path / "first", tmp_path / "second"
    for outcome in outcomes:
        write_outcomes(first, RUN, [outcome])
    for outcome in reversed(outcomes):
        write_outcomes(second, RUN, [outcome])
    for relative in (result_path(Path(), RUN), Path("benchmarks.json")):
        assert (first / relative).read_text() == (second / relative).read_text()
    params = json.loads((first / "benchmarks.json").read_text())["gelu_backward.gelu_bias_backward.time_call"]["params"]
    assert params[1:] == [["'bfloat16'", "'float32'"], ["'eager'", "'torch.compile'"]]


def test_writes_merge_into_the_same_commit_and_environment(tmp_path: Path) -> None:
    write_outcomes(tmp_path, RUN, [ok("eager", "float32", [1.0])])
    write_outcomes(tmp_path, RUN, [ok("fusebench", "float32", [0.5])])
    write_outcomes(tmp_path, RUN, [ok("eager", "float32", [0.75])])  # a re-measurement replaces
    frame = read_results(tmp_path)
    times = frame[frame.metric == "time_call"].set_index("variant")["value"].to_dict()
    assert times == {"eager": 0.75, "fusebench": 0.5}
    benchmarks = json.loads((tmp_path / "benchmarks.json").read_text())
    assert benchmarks["gelu_backward.gelu_bias_backward.time_call"]["params"][2] == ["'eager'", "'fusebench'"]


def test_an_interrupted_write_leaves_the_previous_file_intact(tmp_path: Path, monkeypatch) -> None:
    path = write_outcomes(tmp_path, RUN, [ok("eager", "float32", [1.0])])
    before = path.read_bytes()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt  # as if Ctrl-C arrived between writing and renaming

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_outcomes(tmp_path, RUN, [ok("fusebench", "float32", [0.5])])
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name, "machine.fusebench", "machine.json"]  # no temp


def test_a_failure_while_writing_leaves_the_previous_file_intact(tmp_path: Path, monkeypatch) -> None:
    path = write_outcomes(tmp_path, RUN, [ok("eager", "float32", [1.0])])
    before = path.read_bytes()

    def disk_full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space"):
        write_outcomes(tmp_path, RUN, [ok("fusebench", "float32", [0.5])])
    assert path.read_bytes() == before
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]
    assert read_result_file(path).variant.unique().tolist() == ["eager"]


def test_a_damaged_result_file_is_reported_not_overwritten(tmp_path: Path) -> None:
    path = result_path(tmp_path, RUN)
    path.parent.mkdir(parents=True)
    path.write_text('{"commit_hash": "0123')
    with pytest.raises(ResultsError, match=r"cannot read .*01234567-fusebench"):
        write_outcomes(tmp_path, RUN, [ok("eager", "float32", [1.0])])
    assert path.read_text() == '{"commit_hash": "0123'
