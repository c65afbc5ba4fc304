"""Generated source is compiled once per text; the code object serves every function made from it."""

from __future__ import annotations

import traceback

import pytest

from compiler.core.python_code import code_for

SOURCE = "def f(y):\n    return X + y\n"


def test_the_same_text_compiles_once_and_runs_under_each_scope() -> None:
    code = code_for(SOURCE, "<test f>")
    assert code_for(SOURCE, "<test f>") is code
    assert code_for(SOURCE + "\n", "<test f>") is not code
    scopes: list[dict] = [{"X": 1}, {"X": 10}]
    for scope in scopes:
        exec(code, scope)
    assert [scope["f"](1) for scope in scopes] == [2, 11]


def test_tracebacks_name_the_generated_file() -> None:
    scope: dict = {}
    exec(code_for(SOURCE, "<fusebench t_0>"), scope)
    with pytest.raises(NameError) as raised:
        scope["f"](1)
    assert '"<fusebench t_0>", line 2' in "".join(traceback.format_tb(raised.tb))
