"""scripts/patterns_nvfuser.py: the user-pattern battery through the nvFuser executor (here the CPU
fake), every failure one line."""

from __future__ import annotations

import pytest

from compiler.executors.nvfuser.executor import FALLBACK_ENV
from scripts import patterns_nvfuser


def test_patterns_run_through_the_fake_and_a_failure_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(FALLBACK_ENV, raising=False)  # restored after the test (the script turns it off)
    assert patterns_nvfuser.main(["--fake", "-k", "split_equal", "qkv_split_projection"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "0 of 2 patterns failed"
    from tests.support import user_patterns

    def broken(pattern, **options):
        if pattern.name == "split_equal":
            raise AssertionError("split_equal output leaf 0: Tensor-likes are not close!\nmore")
        return 1

    monkeypatch.setattr(user_patterns, "check_pattern", broken)
    assert patterns_nvfuser.main(["--fake", "-k", "split_equal", "qkv_split_projection"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert "FAILED split_equal: AssertionError: split_equal output leaf 0: Tensor-likes are not close!" in lines
    assert lines[-1] == "1 of 2 patterns failed"
    assert patterns_nvfuser.main(["--fake", "-k", "no pattern is named so"]) == 2
