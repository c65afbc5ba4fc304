"""scripts/call_overhead.py: prints one row per program and per training-loop idiom (timings are
not checked: the script measures them; the test checks that every path it times runs)."""

from __future__ import annotations

import pytest

from scripts import call_overhead


@pytest.mark.slow
def test_prints_the_breakdown_and_the_idioms(capsys: pytest.CaptureFixture[str]) -> None:
    assert call_overhead.main(["--calls", "20", "--batches", "2"]) == 0
    lines = capsys.readouterr().out.split("adam-32 sched, CUDA graphs:")[0].splitlines()
    names = [line[:13].strip() for line in lines[2:]]
    assert names == ["1-op", "20-op", "autograd", "autograd fwd", "adam-32", "adam-32 sched"], lines
    assert all(len(line.split()) >= 4 for line in lines[2:]), lines
