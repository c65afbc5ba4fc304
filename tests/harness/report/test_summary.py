"""The lines `fusebench run` ends with: fusebench against its fastest peer, per (case, params)."""

from __future__ import annotations

import pytest

from fusebench.measure.outcome import Outcome
from fusebench.measure.stats import summarize
from fusebench.report.scoreboard import rows_from_outcomes
from fusebench.report.summary import best_peer, format_ratio, headline, peer_ratio, render_summary


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


def _paired(outcome: Outcome, **ratios: tuple[float, float]) -> Outcome:
    """`outcome` with paired ratios (this variant over another's, spread), keyed by the other's name."""
    paired = {name.replace("_", "."): {"ratio": r, "spread": s, "pairs": 20} for name, (r, s) in ratios.items()}
    return Outcome(**{**outcome.__dict__, "extra": {"paired": paired}})


def test_a_paired_ratio_is_the_verdict_and_the_line_gives_the_separate_one_beside_it() -> None:
    # apart, fusebench looked 1.25x slower than torch.compile; timed alternately it is 0.90x
    run = [
        _outcome("mlp", "eager", 10e-6),
        _outcome("mlp", "torch.compile", 4e-6),
        _paired(_outcome("mlp", "fusebench", 5e-6), eager=(0.5, 0.02), torch_compile=(0.9, 0.03)),
        _outcome("norm", "eager", 10e-6),
        _outcome("norm", "fusebench", 5e-6),
    ]
    (mlp, norm) = rows_from_outcomes(run)
    assert peer_ratio(mlp) == pytest.approx(0.9) and peer_ratio(norm) == pytest.approx(0.5)
    lines = render_summary([mlp, norm]).splitlines()
    assert lines[0].endswith("fusebench is faster in 2; 1 of the ratios from samples timed alternately")
    assert lines[1].split()[2] == "0.90×"
    assert lines[1].endswith("best peer torch.compile 4.00 µs; timed alternately 0.90× (measured apart 1.25×)")
    assert lines[2].endswith("best peer eager 10.0 µs")


def test_with_every_peer_paired_the_best_peer_is_the_one_fusebench_is_slowest_against() -> None:
    run = [
        _outcome("mlp", "eager", 3.9e-6),  # measured apart in a fast spell of the machine
        _outcome("mlp", "torch.compile", 4e-6),
        _paired(_outcome("mlp", "fusebench", 5e-6), eager=(0.7, 0.02), torch_compile=(0.9, 0.03)),
    ]
    (row,) = rows_from_outcomes(run)
    assert best_peer(row).variant == "torch.compile" and peer_ratio(row) == pytest.approx(0.9)
    # a peer left unpaired: the fastest measured apart is the best peer, with its paired ratio if any
    (partly,) = rows_from_outcomes([*run[:2], _paired(run[2], eager=(0.7, 0.02))])
    assert best_peer(partly).variant == "eager" and peer_ratio(partly) == pytest.approx(0.7)
    (unpaired,) = rows_from_outcomes([*run[:2], _paired(run[2], torch_compile=(0.9, 0.03))])
    assert best_peer(unpaired).variant == "eager" and peer_ratio(unpaired) == pytest.approx(5 / 3.9)


def test_a_peer_measured_after_fusebench_holds_the_pairing() -> None:
    run = [_outcome("mlp", "fusebench", 5e-6), _paired(_outcome("mlp", "thunder", 8e-6), fusebench=(2.0, 0.01))]
    (row,) = rows_from_outcomes(run)
    assert row.paired("fusebench", "thunder") == pytest.approx((0.5, 0.01))
    assert peer_ratio(row) == pytest.approx(0.5)


def test_a_paired_ratio_is_noisy_by_its_pairs_spread_not_by_the_separate_measurements() -> None:
    plateaus = summarize([2.5e-3] * 5 + [5.3e-3] * 6)  # apart: fusebench's samples on two plateaus
    steady = Outcome("s", "llama", {"n": 4}, "fusebench", "cuda", "ok", "", timing=plateaus)
    run = [_outcome("llama", "torch.compile", 2.8e-3), _paired(steady, torch_compile=(0.95, 0.04))]
    (row,) = rows_from_outcomes(run)
    assert "noisy" not in render_summary([row])
    (shaky,) = rows_from_outcomes([run[0], _paired(steady, torch_compile=(0.95, 0.4))])
    lines = render_summary([shaky]).splitlines()
    assert lines[0].endswith(
        "1 of the ratios from samples timed alternately; 1 of the ratios noisy (IQR above 25% of the median)"
    )
    assert lines[1].endswith("  (noisy: IQR / median of the pairs' ratios 40%; measure again for a verdict)")
