"""scripts/graph_idioms: the training loops CUDA graphs must not lose on, one line per variant."""

from __future__ import annotations

import pytest

from scripts import graph_idioms


def test_each_idiom_prints_a_line_per_variant_and_cpu_skips_explicit_graphs(capsys):
    assert graph_idioms.main(["--idioms", "rmsnorm,adam", "--small", "--steps", "2", "--device", "cpu"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in lines] == [
        [idiom, variant] for idiom in ("rmsnorm", "adam") for variant in ("eager", "ungraphed", "automatic", "graphs")
    ]
    assert all(" median " in line and " fastest " in line for line in lines if "graphs " not in line)
    assert "automatic" in lines[2] and "not graphed (CUDA is unavailable)" in lines[2]
    assert lines[3].endswith("skipped: jit(cuda_graphs=True) needs a CUDA device, not cpu")


def test_an_unknown_idiom_is_refused_naming_the_known_ones(capsys):
    with pytest.raises(SystemExit) as raised:
        graph_idioms.main(["--idioms", "rmsnorm,lstm"])
    assert raised.value.code == 2 and "--idioms: lstm; expected some of rmsnorm, mlp, adam" in capsys.readouterr().err
