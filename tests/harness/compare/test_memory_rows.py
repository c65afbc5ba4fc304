"""Peak device memory in `fusebench compare`: its own row per benchmark, judged like time."""

from __future__ import annotations

import numpy as np

from fusebench.compare.comparison import compare_runs, comparison_document, render
from fusebench.compare.interleave import SideRun
from fusebench.compare.memory_rows import memory_verdict

RNG = np.random.default_rng(7)


def _outcome(case: str, peak: int | None, median: float = 1e-3) -> dict:
    samples = list(median * (1 + 0.01 * RNG.standard_normal(50)))
    return {
        "suite": "s", "case": case, "params": {"n": 4}, "variant": "fusebench", "status": "ok", "detail": "",
        "timing": {"samples": samples, "median": median}, "peak_device_bytes": peak,
    }  # fmt: skip


def _rounds(side: str, peaks: dict[str, int | None], rounds: int = 3) -> list[SideRun]:
    return [
        SideRun(side, r, 0, 1.0, outcomes=[_outcome(case, peak) for case, peak in peaks.items()]) for r in range(rounds)
    ]


def test_more_peak_memory_at_the_same_speed_is_a_regression_of_its_own_row() -> None:
    a = _rounds("A", {"same": 1 << 20, "grew": 1 << 20, "shrank": 4 << 20, "cpu": None})
    b = _rounds("B", {"same": 1 << 20, "grew": 3 << 19, "shrank": 1 << 20, "cpu": None})
    comparisons = compare_runs(a, b)
    memory = {c.case: c for c in comparisons if c.metric == "track_peak_device_bytes"}
    times = {c.case: c for c in comparisons if c.metric == "time_call"}
    assert set(times) == {"same", "grew", "shrank", "cpu"} and set(memory) == {"same", "grew", "shrank"}
    assert all(c.verdict == "no change" for c in times.values())
    assert {case: c.verdict for case, c in memory.items()} == {
        "same": "no change",
        "grew": "slower",
        "shrank": "faster",
    }
    assert memory["grew"].regressed and not memory["shrank"].regressed
    assert round(memory["grew"].decision.ratio, 9) == 1.5 and round(memory["grew"].a.median) == 1 << 20
    table = render(comparisons)
    (grew,) = [line for line in table.splitlines() if line.startswith("grew") and "memory" in line]
    assert grew.split()[2:12] == [
        "fusebench",
        "(peak",
        "device",
        "memory)",
        "1.00",
        "MiB",
        "1.50",
        "MiB",
        "1.500",
        "[1.500,",
    ]
    assert "more memory" in grew
    document = comparison_document(comparisons, {"a": {}, "b": {}})
    assert [b["metric"] for b in document["benchmarks"]].count("track_peak_device_bytes") == 3


def test_a_change_below_the_minimum_effect_or_from_zero_bytes() -> None:
    assert memory_verdict([1000, 1000], [1040, 1040])[0] == "no change"  # 4% < 5%
    assert memory_verdict([0, 0], [0, 0]) == ("no change", None)
    assert memory_verdict([0, 0], [512, 512]) == ("slower", None)
    assert memory_verdict([512], [0]) == ("faster", None)
