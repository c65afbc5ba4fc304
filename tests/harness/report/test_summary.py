"""The lines `fusebench run` ends with: fusebench against its fastest peer, per (case, params)."""

from __future__ import annotations

import pytest

from fusebench.measure.outcome import Outcome
from fusebench.measure.stats import summarize
from fusebench.report.scoreboard import rows_from_outcomes
from fusebench.report.summary import format_ratio, headline, peer_ratio, render_summary


def _outcome(case: str, variant: str, median: float | None, status: str = "ok", detail: str = "") -> Outcome:
    timing = summarize([median * 0.99, median, median * 1.01]) if median else None
    return Outcome("s", case, {"n": 4}, variant, "cpu", status, detail, timing=timing)


RUN = [
    _outcome("fast", "eager", 4e-6),
    _outcome("fast", "torch.compile", 2e-6),
    _outcome("fast", "fusebench", 1e-6),
    _outcome("fast", "fusebench-torch", 0.5e-6),  # ours: never the peer
    _outcome("slow", "eager", 100e-6),
    _outcome("slow", "fusebench", 274e-6),
    _outcome("slow", "thunder", None, "skipped", "lightning-thunder is not installed"),
    _outcome("broken", "eager", 1e-3),
    _outcome("broken", "fusebench", None, "unsupported", "prims.erf has no implementation " + "x" * 200),
    _outcome("alone", "fusebench", 1e-3),
    _outcome("no_ours", "eager", 1e-3),
]


def test_ratios_print_compactly() -> None:
    assert [format_ratio(r) for r in (0.0123, 0.97, 2.744, 12.34, 152.2, None)] == [
        "0.012×",
        "0.97×",
        "2.74×",
        "12.3×",
        "152×",
        "-",
    ]


def test_ratios_round_to_three_significant_digits_across_decades() -> None:
    assert [format_ratio(r) for r in (9.999, 99.96, 0.09996, 0.0994, 1523.4)] == [
        "10.0×",
        "100×",
        "0.10×",
        "0.099×",
        "1523×",
    ]


def test_the_ratio_is_fusebench_over_the_fastest_peer() -> None:
    fast, slow, broken, alone, no_ours = rows_from_outcomes(RUN)
    assert peer_ratio(fast) == pytest.approx(0.5)  # torch.compile is the best peer, not fusebench-torch
    assert peer_ratio(slow) == pytest.approx(2.74)
    assert peer_ratio(broken) is None and peer_ratio(alone) is None and peer_ratio(no_ours) is None


def test_the_summary_has_a_headline_then_one_line_per_case() -> None:
    lines = render_summary(rows_from_outcomes(RUN)).splitlines()
    assert lines[0] == (
        "fusebench vs best peer (time per call, < 1× means fusebench is faster): 0.50× ... 2.74×, "
        "geometric mean 1.17×, over 2 of 4 (case, params); fusebench is faster in 1"
    )
    assert [line.split()[:3] for line in lines[1:]] == [
        ["fast", "n=4", "0.50×"],
        ["slow", "n=4", "2.74×"],
        ["broken", "n=4", "-"],
        ["alone", "n=4", "-"],
    ]
    assert lines[1].endswith("fusebench 1.00 µs, best peer torch.compile 2.00 µs")
    assert lines[3].endswith("...") and "fusebench unsupported: prims.erf has no implementation" in lines[3]
    assert len(lines[3]) < 140
    assert lines[4].endswith("fusebench 1.00 ms, no peer timed")
    assert len({line.index("n=4") for line in lines[1:]}) == 1  # aligned columns


def test_nothing_to_summarize_without_fusebench() -> None:
    assert render_summary(rows_from_outcomes(RUN[-1:])) == ""
    assert headline(rows_from_outcomes(RUN[7:9])).endswith(
        "no (case, params) has both a fusebench time and a peer's time"
    )


def test_a_crashed_fusebench_shows_as_crashed_with_its_reason() -> None:
    crash = "killed by SIGABRT | last output: terminate called after throwing an instance of 'nvfuser::nvfError'"
    rows = rows_from_outcomes([_outcome("c", "eager", 1e-3), _outcome("c", "fusebench", None, "crashed", crash)])
    headline_line, line = render_summary(rows).splitlines()
    assert headline_line.endswith("no (case, params) has both a fusebench time and a peer's time")
    assert line.split()[:3] == ["c", "n=4", "-"]
    assert "fusebench crashed: killed by SIGABRT | last output: terminate called" in line and line.endswith("...")


def test_a_ratio_of_a_noisy_measurement_says_so_and_the_headline_counts_it() -> None:
    # samples on two plateaus (a loaded machine): the median lands on either, so the ratio is no verdict
    plateaus = summarize([2.5e-3] * 5 + [5.3e-3] * 6)
    run = [
        Outcome("s", "llama", {"n": 4}, "fusebench", "cuda", "ok", "", timing=plateaus),
        _outcome("llama", "torch.compile", 2.8e-3),
        _outcome("bert", "fusebench", 3.6e-3),
        _outcome("bert", "torch.compile", 4.2e-3),
    ]
    lines = render_summary(rows_from_outcomes(run)).splitlines()
    assert lines[0].endswith("fusebench is faster in 1; 1 of the ratios noisy (IQR above 25% of the median)")
    noisy = "  (noisy: IQR / median fusebench 53%; measure again for a verdict)"
    assert lines[1].endswith("best peer torch.compile 2.80 ms" + noisy)
    assert lines[2].endswith("best peer torch.compile 4.20 ms")
