"""Three `fusebench run --shard I/3` results folders merged by `fusebench report --merge` hold the
same benchmarks, parameters and measured combinations as one unsharded run."""

from __future__ import annotations

from pathlib import Path

import pytest

from fusebench.cli import main
from fusebench.files import read_json

COMMIT = "5" * 40
SELECTION = ["--suite", "host_overhead", "--suite", "llm_norms", "--variant", "eager"]
RUN = ["run", *SELECTION, "--device", "cpu", "--repeat-budget", "0.002", "--no-artifacts"]
RUN += ["--machine", "shard-test", "--commit", COMMIT]


@pytest.fixture(autouse=True)
def cache_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUSEBENCH_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "fusebench-cache"))


def result_file(results: Path) -> dict:
    (path,) = [p for p in (results / "shard-test").glob("*.json") if p.name != "machine.json"]
    return read_json(path)


def measured(document: dict) -> dict[str, list]:
    """Per benchmark: its parameter axes and which results have a value."""
    columns = document["result_columns"]
    shown = {}
    for name, row in document["results"].items():
        data = dict(zip(columns, row))
        shown[name] = [data["params"], [value is not None for value in data["result"] or []]]
    return shown


def descriptions(results: Path) -> dict[str, tuple]:
    document = read_json(results / "benchmarks.json")
    return {
        name: (d["params"], d["param_names"], d["type"], d["unit"]) for name, d in document.items() if name != "version"
    }


@pytest.mark.slow
def test_three_merged_shards_equal_one_unsharded_run(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main([*RUN, "--results", str(tmp_path / "whole")]) == 0
    for index in (1, 2, 3):
        assert main([*RUN, "--shard", f"{index}/3", "--results", str(tmp_path / f"shard{index}")]) == 0
    err = capsys.readouterr().err
    assert "shard 2/3: " in err and " of the 9 (case, params) selected" in err
    shard_sets = [set(measured(result_file(tmp_path / f"shard{i}"))) for i in (1, 2, 3)]
    assert all(shard_sets) and shard_sets[0] != shard_sets[1]  # each shard measured a share
    merge = [arg for i in (1, 2, 3) for arg in ("--merge", str(tmp_path / f"shard{i}"))]
    output = tmp_path / "report.html"
    assert main(["report", "--results", str(tmp_path / "merged"), *merge, "-o", str(output)]) == 0
    assert "merged 1 result file of" in capsys.readouterr().out
    whole, merged = result_file(tmp_path / "whole"), result_file(tmp_path / "merged")
    assert measured(merged) == measured(whole)
    assert sorted(merged["fusebench"]["outcomes"], key=str) == sorted(
        ({**o, "detail": o["detail"]} for o in whole["fusebench"]["outcomes"]), key=str
    )
    assert descriptions(tmp_path / "merged") == descriptions(tmp_path / "whole")
    assert read_json(tmp_path / "merged" / "shard-test" / "machine.json")["torch"]
    assert output.stat().st_size > 0


@pytest.mark.slow
def test_a_worker_process_measures_the_same_shard(tmp_path: Path) -> None:
    assert main([*RUN, "--shard", "2/3", "--results", str(tmp_path / "here")]) == 0
    assert main([*RUN, "--shard", "2/3", "--isolate", "--results", str(tmp_path / "worker")]) == 0
    assert measured(result_file(tmp_path / "worker")) == measured(result_file(tmp_path / "here"))
