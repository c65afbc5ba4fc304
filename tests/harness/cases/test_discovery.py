"""Finding suites in the bundled package and in a user's folder."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from fusebench.cases.discovery import discover, discover_folder
from fusebench.errors import CaseError, SuiteError

SUITE = """
import torch
from fusebench.cases.case import Case
from helpers import SCALE  # a sibling module of the folder


def scale(x):
    return x * SCALE


CASES = [
    Case(
        name="scale",
        fn=scale,
        make_inputs=lambda params, device, seed: (torch.ones(params["n"], device=device),),
        bytes_moved=lambda params: 8 * params["n"],
        params={"n": [1024]},
        quick_params={"n": [16]},
    )
]
"""


def write(folder: Path, name: str, text: str) -> None:
    (folder / name).write_text(textwrap.dedent(text))


def test_a_user_folder_is_searched_instead_of_the_bundled_suites(tmp_path: Path) -> None:
    write(tmp_path, "my_suite.py", SUITE)
    write(tmp_path, "helpers.py", "SCALE = 3.0\n")  # no CASES: not a suite
    write(tmp_path, "_private.py", "raise RuntimeError('never imported')\n")
    (suite,) = discover([tmp_path])
    assert suite.name == "my_suite"
    assert suite.path == str(tmp_path / "my_suite.py")
    (case,) = suite.cases
    assert case.grid(quick=True) == [{"n": 16}]
    assert case.fn(case.make_inputs({"n": 2}, "cpu", 0)[0]).tolist() == [3.0, 3.0]


def test_the_bundled_package_holds_the_required_suites() -> None:
    names = {suite.name for suite in discover()}
    assert {"gelu_backward", "adam_step", "kv_cache_sdpa", "dynamic_split", "host_overhead"} <= names


def test_a_broken_suite_module_names_its_file(tmp_path: Path) -> None:
    write(tmp_path, "broken.py", "import does_not_exist_anywhere\nCASES = []\n")
    with pytest.raises(SuiteError, match=r"importing suite module .*broken\.py failed: ModuleNotFoundError"):
        discover_folder(tmp_path)


def test_cases_must_be_case_objects(tmp_path: Path) -> None:
    write(tmp_path, "wrong.py", "CASES = [{'name': 'x'}]\n")
    with pytest.raises(SuiteError, match=r"wrong\.py: CASES\[0\] is a dict; expected fusebench.cases.Case"):
        discover_folder(tmp_path)


def test_a_malformed_case_says_which_attribute_is_wrong(tmp_path: Path) -> None:
    bad = SUITE.replace('params={"n": [1024]}', 'params={"n": 1024}')
    write(tmp_path, "bad.py", bad)
    write(tmp_path, "helpers.py", "SCALE = 3.0\n")
    with pytest.raises(SuiteError) as raised:
        discover_folder(tmp_path)
    assert isinstance(raised.value.__cause__, CaseError)
    assert "scale.params['n'] is not a non-empty list" in str(raised.value)


def test_a_missing_folder_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match="not a directory"):
        discover([tmp_path / "nope"])
