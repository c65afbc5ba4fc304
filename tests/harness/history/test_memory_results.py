"""Peak memory in ASV's result files: its own benchmarks, unit bytes, read back per measurement."""

from __future__ import annotations

from pathlib import Path

from fusebench.files import read_json
from fusebench.history.results import RunInfo, read_results, write_outcomes
from fusebench.history.revision import Revision
from fusebench.measure.machine import machine_info
from fusebench.measure.outcome import Outcome
from fusebench.measure.stats import summarize

RUN = RunInfo(machine_info("m"), Revision("ab" * 20, 1_700_000_000_000, False), "fusebench-cuda-py3.11-torch2.13.0")


def test_peak_memory_is_recorded_as_bytes_benchmarks_and_read_back(tmp_path: Path) -> None:
    timing = summarize([1e-3, 1e-3, 1e-3])
    base = {"suite": "s", "case": "c", "params": {"n": 4}, "device": "cuda:0", "timing": timing}
    outcomes = [
        Outcome(**base, variant="eager", status="ok", peak_device_bytes=4096, peak_host_rss_bytes=1 << 30),
        Outcome(**base, variant="fusebench", status="ok", peak_device_bytes=1024, peak_host_rss_bytes=1 << 29),
        Outcome(**base, variant="thunder", status="failed", peak_device_bytes=99),
    ]
    write_outcomes(tmp_path, RUN, outcomes)
    descriptions = read_json(tmp_path / "benchmarks.json")
    for metric in ("track_peak_device_bytes", "track_peak_host_rss_bytes"):
        assert descriptions[f"s.c.{metric}"]["type"] == "track"
        assert descriptions[f"s.c.{metric}"]["unit"] == "bytes"
    frame = read_results(tmp_path)
    device = frame[frame.metric == "track_peak_device_bytes"].set_index("variant")
    assert device.loc["eager", "value"] == 4096 and device.loc["fusebench", "value"] == 1024
    assert device.loc["thunder", "status"] == "failed" and device.loc["thunder", "value"] != 99  # no value: NaN
    host = frame[frame.metric == "track_peak_host_rss_bytes"].set_index("variant")
    assert host.loc["fusebench", "value"] == 1 << 29


def test_a_step_up_of_peak_device_memory_is_a_regression_and_host_rss_is_not_checked() -> None:
    import pandas as pd

    from fusebench.history.regressions import find_regressions

    rows = []
    for metric in ("track_peak_device_bytes", "track_peak_host_rss_bytes"):
        for index, value in enumerate([100, 100, 100, 100, 150, 150, 150, 150]):
            rows.append(
                {
                    "machine": "m", "env": "e", "commit": f"{index:08x}", "date": index, "suite": "s", "case": "c",
                    "params": "n=1", "variant": "v", "metric": metric, "unit": "bytes", "value": float(value << 20),
                    "q25": None, "q75": None,
                }
            )  # fmt: skip
    (found,) = find_regressions(pd.DataFrame(rows))
    assert found.metric == "track_peak_device_bytes"
    assert (found.before_commit, found.after_commit) == ("00000003", "00000004")
    assert round(found.change, 3) == 0.5
