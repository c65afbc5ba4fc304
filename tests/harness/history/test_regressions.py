"""Step detection over ASV histories: the injected steps are found, with the right commit ranges."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from fusebench.history.regressions import find_regressions, ordered_series
from fusebench.history.results import read_results
from tests.support.histories import write_history


def test_the_injected_steps_are_found_with_their_commit_ranges(tmp_path: Path) -> None:
    commits = write_history(tmp_path / "results", commits=8, step_at=5)
    found = find_regressions(read_results(tmp_path / "results"))
    by_metric = {(r.case, r.metric): r for r in found}
    assert set(by_metric) == {("gelu_bias_backward", "time_call"), ("dynamic_split", "track_recompilations")}, found
    time = by_metric["gelu_bias_backward", "time_call"]
    assert (time.variant, time.params) == ("fusebench", "shape=(4, 64, 256), dtype='float32'")
    assert (time.before_commit, time.after_commit) == (commits[4], commits[5])
    assert 0.3 < time.change < 0.5
    assert time.commit_range == f"{commits[4][:8]}..{commits[5][:8]}"
    recompiles = by_metric["dynamic_split", "track_recompilations"]
    assert (recompiles.before_commit, recompiles.after_commit) == (commits[5], commits[6])
    assert (recompiles.value_before, recompiles.value_after) == (0, 19)
    assert found[0] is recompiles, "worst first: a step from 0 is infinitely worse"


def test_a_flat_history_and_an_improvement_are_not_regressions(tmp_path: Path) -> None:
    rows = []
    for index, value in enumerate([1.0, 1.01, 0.99, 1.0, 0.6, 0.61, 0.6, 0.59]):
        rows.append(
            {
                "machine": "m", "env": "e", "commit": f"{index:08x}", "date": index, "suite": "s", "case": "c",
                "params": "n=1", "variant": "v", "metric": "time_call", "unit": "seconds", "value": value,
                "q25": value * 0.99, "q75": value * 1.01,
            }
        )  # fmt: skip
    assert find_regressions(pd.DataFrame(rows)) == []


def test_a_small_step_under_the_threshold_is_ignored(tmp_path: Path) -> None:
    frame = pd.DataFrame(
        {
            "machine": "m", "env": "e", "commit": [f"{i:08x}" for i in range(8)], "date": range(8), "suite": "s",
            "case": "c", "params": "n=1", "variant": "v", "metric": "time_call", "unit": "seconds",
            "value": [1.0] * 4 + [1.03] * 4, "q25": None, "q75": None,
        }
    )  # fmt: skip
    assert find_regressions(frame, threshold=0.05) == []
    (regression,) = find_regressions(frame, threshold=0.01)
    assert regression.commit_range == "00000003..00000004"


def test_series_are_ordered_by_commit_date_not_by_file_order() -> None:
    frame = pd.DataFrame({"commit": ["b", "a", "c"], "date": [2, 1, 3], "value": [2.0, 1.0, 3.0]})
    assert list(ordered_series(frame).commit) == ["a", "b", "c"]
