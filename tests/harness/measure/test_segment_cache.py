"""Segment profiling once per fusion definition and input layouts, cached on disk across runs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fusebench.measure.segment_cache import SegmentCache, cached_segments

ENV = "nvfuser 0.2|torch 2.13|NVIDIA H100"


@dataclass
class FakeReport:
    name: str
    schedulers: list[str]

    def __str__(self) -> str:
        return f"{self.name}: {len(self.schedulers)} kernels\n  segment 0: {self.schedulers[0]}"


class Profiler:
    """Stands for `examine.segments`: records which fusions it was asked to profile."""

    def __init__(self) -> None:
        self.asked: list[list[str]] = []

    def __call__(self, names: list[str]) -> list[FakeReport]:
        self.asked.append(list(names))
        return [FakeReport(name, ["reduction", "pointwise"] if name.endswith("0") else ["pointwise"]) for name in names]


def test_a_definition_is_profiled_once_across_runs_and_renamed_where_met_again(tmp_path: Path) -> None:
    fusions = [("nvFusion0", "def norm(fd): ...", ["T0: (4, 8) float32"]), ("nvFusion1", "def add(fd): ...", [])]
    first = Profiler()
    found = cached_segments(fusions, first, SegmentCache(tmp_path), ENV)
    assert first.asked == [["nvFusion0", "nvFusion1"]]
    assert found["nvFusion0"].schedulers == ["reduction", "pointwise"]
    # a later run (a fresh cache object on the same folder), the same norm fusion named nvFusion3
    later = Profiler()
    again = cached_segments(
        [("nvFusion3", "def norm(fd): ...", ["T0: (4, 8) float32"])], later, SegmentCache(tmp_path), ENV
    )
    assert later.asked == []
    assert again["nvFusion3"].text.startswith("nvFusion3: 2 kernels") and "nvFusion0" not in again["nvFusion3"].text


def test_other_layouts_software_or_a_missing_definition_are_profiled(tmp_path: Path) -> None:
    cache = SegmentCache(tmp_path)
    cached_segments([("f", "def norm(fd): ...", ["T0: (4, 8)"])], Profiler(), cache, ENV)
    for fusions, environment in (
        ([("f", "def norm(fd): ...", ["T0: (8, 4)"])], ENV),  # other input layout
        ([("f", "def norm(fd): ...", ["T0: (4, 8)"])], ENV + " v2"),  # other nvFuser / GPU
        ([("f", "", ["T0: (4, 8)"])], ENV),  # no definition source: never cached
        ([("f", "", ["T0: (4, 8)"])], ENV),
    ):
        profiler = Profiler()
        assert "f" in cached_segments(fusions, profiler, cache, environment)
        assert profiler.asked == [["f"]]


def test_an_unreadable_entry_is_profiled_again(tmp_path: Path) -> None:
    cache = SegmentCache(tmp_path)
    cached_segments([("f", "def add(fd): ...", [])], Profiler(), cache, ENV)
    (entry,) = tmp_path.glob("*.json")
    entry.write_text("{not json")
    profiler = Profiler()
    assert cached_segments([("f", "def add(fd): ...", [])], profiler, cache, ENV)["f"].schedulers == ["pointwise"]
    assert profiler.asked == [["f"]]
