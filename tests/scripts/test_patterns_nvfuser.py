"""scripts/patterns_nvfuser.py: the user-pattern battery through the nvFuser executor (here the CPU
fake), every failure one line."""

from __future__ import annotations

import os

import pytest

from compiler.executors.nvfuser.executor import FALLBACK_ENV
from scripts import patterns_nvfuser


def test_patterns_run_through_the_fake_and_a_failure_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(FALLBACK_ENV, raising=False)
    assert patterns_nvfuser.main(["--fake", "-k", "split_equal", "qkv_split_projection"]) == 0
    assert FALLBACK_ENV not in os.environ  # the run turned fallbacks off for itself only
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


def test_shards_split_the_patterns_and_full_errors_keep_every_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support import user_patterns

    ran: list[str] = []

    def record(pattern, **options):
        ran.append(pattern.name)
        if pattern.name == "split_equal":
            raise AssertionError("first line\nsecond line")
        return 1

    monkeypatch.setattr(user_patterns, "check_pattern", record)
    names = ["split_equal", "qkv_split_projection", "softmax"]
    shards = []
    for index in range(2):
        ran.clear()
        patterns_nvfuser.main(["--fake", "--full", "--shard", f"{index}/2", "-k", *names])
        shards.append(list(ran))
    assert sorted(shards[0] + shards[1]) == sorted(set(shards[0] + shards[1])) and not set(shards[0]) & set(shards[1])
    assert "second line" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        patterns_nvfuser.main(["--shard", "2/2"])
    assert "--shard takes I/N" in capsys.readouterr().err
