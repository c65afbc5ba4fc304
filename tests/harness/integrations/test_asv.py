"""The suites as ASV benchmarks: the same names, parameters and versions `fusebench run` records,
and `asv run --quick` + `asv publish` on CPU (host_overhead.one_op with eager: about 15 s)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from asv_runner.discovery import disc_benchmarks

from fusebench.cases.discovery import discover
from fusebench.cli import main
from fusebench.errors import FusebenchError
from fusebench.history.machine_file import machine_facts, restore_machine_facts
from fusebench.history.results import read_results
from fusebench.integrations.asv_adapter import asv_settings, parameter_axes
from fusebench.measure.outcome import METRICS, TIME, benchmark_version

ROOT = Path(__file__).resolve().parents[3]
ASV = [sys.executable, "-m", "asv"]


def test_asv_discovers_every_metric_of_every_case_under_the_harness_names() -> None:
    discovered = {b.name: b for b in disc_benchmarks(str(ROOT / "suites"))}
    for suite in discover():
        for case in suite.cases:
            grid_reprs = [
                {repr(v) for v in case.params[n]} | {repr(v) for v in (case.quick_params or {}).get(n, [])}
                for n in case.param_names
            ]
            for metric in METRICS:
                name = f"{suite.name}.{case.name}.{metric.name}"
                assert name in discovered, f"asv does not see {name}"
                benchmark = discovered[name]
                assert benchmark.param_names == [*case.param_names, "variant"]
                assert [set(axis) for axis in benchmark.params[:-1]] == grid_reprs
                assert benchmark.params[-1] == [repr(v) for v in parameter_axes(case)[-1]]
                assert benchmark.version == benchmark_version(case.version)
                assert benchmark.type == metric.kind and benchmark.unit == metric.unit


def test_asv_settings_come_from_the_environment() -> None:
    assert asv_settings({"FUSEBENCH_ASV_DEVICE": "cpu"}).quick
    assert not asv_settings({"FUSEBENCH_ASV_DEVICE": "cpu", "FUSEBENCH_ASV_SIZES": "full"}).quick
    with pytest.raises(FusebenchError, match="FUSEBENCH_ASV_SIZES='tiny': expected 'quick' or 'full'"):
        asv_settings({"FUSEBENCH_ASV_SIZES": "tiny"})


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs the git checkout")
def test_asv_run_records_a_cpu_result_and_publish_shows_both_histories(tmp_path: Path) -> None:
    config = json.loads(_strip_comments((ROOT / "asv.conf.json").read_text()))
    config.update(
        repo=str(ROOT),
        benchmark_dir=str(ROOT / "suites"),
        results_dir=str(tmp_path / "results"),
        html_dir=str(tmp_path / "html"),
        env_dir=str(tmp_path / "env"),
        branches=["HEAD"],  # NOTE: publish shows only commits of `branches`; this checkout may be a feature branch
    )
    (tmp_path / "asv.conf.json").write_text(json.dumps(config))
    env = {
        **os.environ,
        "HOME": str(tmp_path),  # NOTE: asv keeps its machine description in ~/.asv-machine.json
        "ASV_PYTHONPATH": str(ROOT),
        "FUSEBENCH_CACHE_DIR": str(tmp_path / "cache"),
    }
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    conf = ["--config", str(tmp_path / "asv.conf.json")]

    def asv(*args: str) -> str:
        result = subprocess.run([*ASV, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        return result.stdout

    # fusebench's own history of the same commit, then asv's: publish must keep both
    status = main(["run", "--suite", "host_overhead", "-k", "one_op", "--variant", "eager", "--device", "cpu",
                   "--repeat-budget", "0.02", "--results", str(tmp_path / "results"), "--machine", "asv-test",
                   "--commit", commit.strip()])  # fmt: skip
    assert status == 0
    asv("machine", "--yes", "--machine", "asv-test", *conf)
    out = asv("run", *conf, "--python=same", "--quick", "--set-commit-hash", commit.strip(),
              "--machine", "asv-test", "-b", r"host_overhead\.one_op\..*'eager'\)")  # fmt: skip
    assert "host_overhead.one_op.time_call" in out and "failed" not in out
    # asv run rewrote machine.json with its own fields; fusebench's facts are kept and merged back
    machine_dir = tmp_path / "results" / "asv-test"
    assert machine_facts(machine_dir)["torch"] == torch.__version__
    restore_machine_facts(tmp_path / "results")
    assert json.loads((machine_dir / "machine.json").read_text())["torch"] == torch.__version__
    frame = read_results(tmp_path / "results")
    asv_rows = frame[frame.env.str.startswith("existing") & (frame.variant == "eager")]
    time = asv_rows[asv_rows.metric == TIME.name].value.iloc[0]
    assert 0 < time < 1e-3
    assert set(asv_rows.dropna(subset=["value"]).metric) >= {TIME.name, "track_bandwidth_gbs", "track_compile_seconds"}
    asv("publish", *conf)
    graphs = [p.as_posix() for p in (tmp_path / "html" / "graphs").rglob("host_overhead.one_op.time_call.json")]
    # NOTE: graphs are filed by the result's params: fusebench run records torch's version, asv run none
    assert any("/torch-null/" in g for g in graphs), graphs
    assert any("/torch-null/" not in g for g in graphs), graphs


def _strip_comments(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.strip().startswith("//"))


def test_time_call_restores_in_place_inputs_before_every_timed_call() -> None:
    import torch

    from fusebench.cases import Case
    from fusebench.integrations.asv_adapter import AsvSettings, benchmark_class

    def double_in_place(x: torch.Tensor) -> None:
        x.mul_(2.0)

    case = Case(
        name="double_in_place",
        fn=double_in_place,
        make_inputs=lambda params, device, seed: (torch.ones(4, device=device),),
        bytes_moved=lambda params: 32,
        params={"n": [4]},
        mutated_args=(0,),
    )
    cls = benchmark_class("s", "s", case, AsvSettings(torch.device("cpu"), quick=False, budget_s=0.01))
    bench, values = cls(), (4, "eager")
    bench.setup(*values)
    state = cls.time_call.setup.__self__
    cls.time_call.setup(*values)
    live = state.restores[values].__self__.args[0]
    for _ in range(1100):  # NOTE: as ASV does with a setup hook: the setup, then one timed call
        cls.time_call.setup(*values)
        bench.time_call(*values)
        assert live.tolist() == [2.0] * 4  # without the restore: 2**1100 = inf


def test_asv_measures_the_default_run_unless_fusebench_asv_all_is_set() -> None:
    from fusebench.integrations.asv_adapter import benchmark_class
    from tests.support.fakes import tiny_case

    case = tiny_case(params={"n": [8, 16, 32]})
    default = benchmark_class("tiny", __name__, case, asv_settings({"FUSEBENCH_ASV_DEVICE": "cpu"}))()
    default.setup(8, "eager")  # the headline (the first of a sweep) with a default variant
    with pytest.raises(NotImplementedError, match=r"n=16 is not in the case's headline \(FUSEBENCH_ASV_ALL=1"):
        default.setup(16, "eager")
    with pytest.raises(NotImplementedError, match=r"fusebench-dynamo is not a default variant \(FUSEBENCH_ASV_ALL=1"):
        default.setup(8, "fusebench-dynamo")
    everything = asv_settings({"FUSEBENCH_ASV_DEVICE": "cpu", "FUSEBENCH_ASV_ALL": "1"})
    assert everything.everything
    every = benchmark_class("tiny", __name__, case, everything)()
    every.setup(16, "eager")
    every.setup(8, "fusebench-dynamo")
    with pytest.raises(FusebenchError, match="FUSEBENCH_ASV_ALL='yes': expected '1'"):
        asv_settings({"FUSEBENCH_ASV_ALL": "yes"})
