"""Every `fusebench` flag given a wrong value ends the command with one `fusebench CMD: error: ...`
line on stderr naming the flag, the value and what was expected, and exit status 2 (no traceback).

The compiler's own entry points: tests/compiler/test_api_errors.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fusebench.cli import main
from tests.support.histories import write_history

ROOT = Path(__file__).resolve().parents[3]
CPU = ["--device", "cpu"]

# NOTE: (arguments, a substring of the error line); RESULTS is replaced by a folder with a history.
CASES = [
    (
        ["run", *CPU, "--repeat-budget", "abc"],
        "fusebench run: error: argument --repeat-budget: invalid float value: 'abc'",
    ),
    (["run", *CPU, "--repeat-budget", "-1"], "fusebench run: error: --repeat-budget -1: expected a positive number"),
    (["run", *CPU, "--repeat-budget", "0"], "--repeat-budget 0: expected a positive number of seconds"),
    (["run", *CPU, "--devices", "gpu0"], "--devices: 'gpu0' is not 'cpu' or 'cuda:N' with N below the"),
    (["run", *CPU, "--devices", "cuda:99"], "--devices: 'cuda:99' is not 'cpu' or 'cuda:N'"),
    (["run", *CPU, "--devices", ","], "--devices ',': expected 'all' or a comma-separated list like cuda:0,cuda:1"),
    (["run", *CPU, "--suite", "nope"], "--suite nope: no such suite; known suites: ['adam_step'"),
    (["run", *CPU, "-k", "no-case-has-this-id"], "fusebench run: error: the selection flags selected nothing"),
    (["run", *CPU, "--variant", "nope"], "--variant nope: matches no variant; known variants: ['eager'"),
    (["run", "--device", "tpu"], "argument --device: invalid choice: 'tpu' (choose from "),
    (["run", "--no-such-flag"], "fusebench: error: unrecognized arguments: --no-such-flag"),
    (["list", *CPU, "-k", "no-case-has-this-id"], "fusebench list: error: the selection flags selected nothing"),
    (["list", *CPU, "--suite", "nope"], "fusebench list: error: --suite nope: no such suite"),
    (["frobnicate"], "fusebench: error: argument COMMAND: invalid choice: 'frobnicate'"),
    (
        ["compare", "HEAD", "HEAD", *CPU, "--rounds", "0"],
        "fusebench compare: error: --rounds 0: expected a whole number of rounds from 1 to 100",
    ),
    (["compare", "HEAD", "HEAD", *CPU, "--rounds", "two"], "argument --rounds: invalid int value: 'two'"),
    (["compare", "HEAD", "HEAD", *CPU, "--alpha", "1.5"], "--alpha 1.5: expected a probability strictly between 0"),
    (["compare", "HEAD", "HEAD", *CPU, "--alpha", "0"], "--alpha 0: expected a probability strictly between 0 and 1"),
    (["compare", "HEAD", "HEAD", *CPU, "--min-effect", "-0.1"], "--min-effect -0.1: expected a fraction from 0 to 10"),
    (["compare", "HEAD", "HEAD", *CPU, "--repeat-budget", "-2"], "--repeat-budget -2: expected a positive number"),
    (["compare", "no-such-revision", "HEAD", *CPU], "revision 'no-such-revision' is not a commit in"),
    (["compare", "HEAD"], "fusebench compare: error: the following arguments are required: B"),
    (["report", "--results", "RESULTS", "--baseline", "nope"], "--baseline nope: no variant of that name in the"),
    (["report", "--results", "RESULTS", "--threshold", "-1"], "fusebench report: error: --threshold -1: expected"),
    (["report", "--results", "RESULTS", "--compare", "missing.json"], "--compare missing.json: no such file"),
    (["report", "--results", "no-such-folder"], "nothing to report: no results in no-such-folder"),
]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cli-errors") / "results"
    write_history(folder, commits=2)
    return folder


@pytest.mark.parametrize("argv, expected", CASES, ids=[" ".join(argv) for argv, _ in CASES])
def test_a_bad_flag_is_one_error_line_and_status_2(
    argv: list[str], expected: str, results: Path, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch
) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("FUSEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    argv = [str(results) if a == "RESULTS" else a for a in argv]
    try:
        status = main([*argv, *(["--results", str(tmp_path / "out")] if argv[0] == "run" else [])])
    except SystemExit as exit_:
        status = exit_.code
    out, err = capsys.readouterr()
    assert status == 2
    assert expected in err
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err and out == ""


def test_the_process_prints_only_the_error_line() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "fusebench", "run", "--device", "cpu", "--repeat-budget", "-3"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr == "fusebench run: error: --repeat-budget -3: expected a positive number of seconds\n"
    assert result.stdout == ""
