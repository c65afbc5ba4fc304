"""`fusebench run` and `fusebench list` end to end, on tiny quick selections."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fusebench.cli import main
from fusebench.history.results import read_results

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def cache_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUSEBENCH_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "fusebench-cache"))


def test_run_prints_the_table_and_records_results(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    status = main(
        [
            "run",
            "--suite",
            "host_overhead",
            "-k",
            "one_op",
            "--variant",
            "eager,fusebench,thunder",
            "--device",
            "cpu",
            "--repeat-budget",
            "0.02",
            "--results",
            str(tmp_path / "results"),
            "--json",
            str(tmp_path / "run.json"),
        ]
    )
    out, err = capsys.readouterr()
    assert status == 0
    assert "[1/3] host_overhead.one_op(numel=4) eager ... " in err
    header, _rule, *rows = out.split("\n\nresults:")[0].splitlines()
    assert header.split() == [
        "case", "params", "variant", "median", "IQR", "GB/s", "%", "peak", "compile", "s",
        "recompiles", "kernels", "fusions", "peak", "RSS",
    ]  # fmt: skip
    assert rows[0].split()[:3] == ["one_op", "numel=4", "eager"]
    assert rows[1].split()[0] == "fusebench" and rows[1].split()[8:11] == ["0", "n/a", "0"]
    assert rows[1].split()[-1] in ("KiB", "MiB", "GiB")  # the peak RSS of the measurement
    assert rows[2].split()[0] == "thunder"  # skipped without lightning-thunder, measured with it
    headline, case_line, noise_line = out.rstrip().split("\n\n")[-1].splitlines()
    assert re.match(r"machine (quiet|noisy): 1 control \(eager\) rows spread ", noise_line)
    assert headline.startswith("fusebench vs best peer (time per call, < 1× means fusebench is faster): ")
    assert case_line.split()[:2] == ["one_op", "numel=4"] and case_line.split()[2].endswith("×")
    # the ratio is of fusebench and the best peer timed alternately (fusebench.measure.paired)
    apart = r"fusebench [\d.]+ [nµm]?s, best peer (eager|thunder) [\d.]+ [nµm]?s"
    assert re.search(apart + r"; timed alternately [\d.]+× \(measured apart [\d.]+×\)", case_line)
    frame = read_results(tmp_path / "results")
    assert set(frame.variant) == {"eager", "fusebench", "thunder"}
    assert frame[(frame.variant == "eager") & (frame.metric == "time_call")].value.iloc[0] > 0
    recorded = json.loads((tmp_path / "run.json").read_text())
    assert [o["variant"] for o in recorded["outcomes"]] == ["eager", "fusebench", "thunder"]
    assert recorded["outcomes"][1]["extra"]["paired"]["eager"]["pairs"] >= 5  # Settings.min_repeats


WRONG_SUITE = """
import torch
from fusebench.cases.case import Case
from fusebench.cases.variants import Compiled, Variant

WRONG = Variant("off-by-one", lambda target: Compiled(lambda x: x + 2))

CASES = [
    Case(
        name="increment",
        fn=lambda x: x + 1,
        make_inputs=lambda params, device, seed: (torch.zeros(params["n"], device=device),),
        bytes_moved=lambda params: 8 * params["n"],
        params={"n": [4]},
        extra_variants=(WRONG,),
    )
]
"""


def test_a_wrong_result_makes_run_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "mine.py").write_text(textwrap.dedent(WRONG_SUITE))
    argv = ["run", "--suites", str(suites), "--variant", "eager,off-by-one", "--repeat-budget", "0.01"]
    status = main([*argv, "--results", str(tmp_path / "results")])
    out, _ = capsys.readouterr()
    assert status == 1
    assert "off-by-one  failed: output: max abs error 1 at index (0,)" in out


def test_bad_flags_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["run", "--suite", "nope", "--results", str(tmp_path)]) == 2
    assert "fusebench run: error: --suite nope: no such suite" in capsys.readouterr().err


def test_python_dash_m_fusebench_list() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-m", "fusebench", "list", "--device", "cpu", "--suite", "dynamic_split"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "dynamic_split.py" in result.stdout
    assert "shape=(2, 4, 256), dtype=float32, cache=symbolic  (327,680 bytes moved at least)" in result.stdout
