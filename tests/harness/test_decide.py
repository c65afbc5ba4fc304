"""The decision rule of `fusebench compare` and the verdicts of paired measurements."""

from __future__ import annotations

import numpy as np
import pytest

from fusebench.compare.comparison import compare_runs, render, summary_line
from fusebench.compare.decide import DecisionSettings, bootstrap_ratio_ci, decide, mann_whitney_u
from fusebench.compare.interleave import SideRun
from fusebench.errors import FusebenchError

RNG = np.random.default_rng(7)


def test_mann_whitney_u_matches_scipy_with_ties() -> None:
    stats = pytest.importorskip("scipy.stats")
    for a, b in [
        (RNG.normal(1, 0.1, 30), RNG.normal(1.1, 0.1, 40)),
        (np.round(RNG.normal(1, 0.1, 30), 1), np.round(RNG.normal(1.05, 0.1, 25), 1)),
        (RNG.lognormal(0, 0.3, 500), RNG.lognormal(0.02, 0.3, 700)),
    ]:
        expected = stats.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic")
        assert mann_whitney_u(a, b) == pytest.approx((expected.statistic, expected.pvalue), rel=1e-9)


def test_identical_samples_are_no_change_with_p_1() -> None:
    decision = decide([1.0] * 10, [1.0] * 10)
    assert (decision.ratio, decision.p_value, decision.verdict) == (1.0, 1.0, "no change")


def test_a_significant_change_must_also_be_large_enough() -> None:
    a = RNG.normal(100, 1, 2000)
    small = decide(a, a * 1.02)  # hugely significant, 2%: under the 5% minimum effect
    assert small.p_value < 1e-10 and small.verdict == "no change"
    assert decide(a, a * 1.02, DecisionSettings(min_effect=0.01)).verdict == "slower"
    assert decide(a, a * 1.2).verdict == "slower"
    assert decide(a, a / 1.2).verdict == "faster"


def test_few_noisy_samples_are_not_significant_whatever_the_ratio() -> None:
    assert decide([1.0, 3.0, 2.0], [2.5, 1.5, 4.0]).verdict == "no change"


def test_the_bootstrap_interval_covers_the_true_ratio_and_is_reproducible() -> None:
    a, b = RNG.lognormal(0, 0.2, 400), 1.5 * RNG.lognormal(0, 0.2, 400)
    low, high = bootstrap_ratio_ci(a, b)
    assert low < 1.5 < high and high - low < 0.2
    assert bootstrap_ratio_ci(a, b) == (low, high)


def test_bad_settings_name_the_value() -> None:
    with pytest.raises(FusebenchError, match=r"minimum effect -0\.1: expected a fraction >= 0"):
        DecisionSettings(min_effect=-0.1)
    with pytest.raises(FusebenchError, match="alpha 2"):
        DecisionSettings(alpha=2)


def _outcome(case: str, status: str = "ok", median: float = 1e-3, detail: str = "") -> dict:
    samples = list(median * (1 + 0.01 * RNG.standard_normal(50)))
    return {
        "suite": "s", "case": case, "params": {"shape": [2, 3]}, "variant": "v", "status": status, "detail": detail,
        "timing": {"samples": samples, "median": median} if status == "ok" else None,
        "compile_seconds": 0.5, "recompilations": 0 if case != "recompiles" else 19,
    }  # fmt: skip


def test_verdicts_cover_failed_new_gone_skipped_and_regressions() -> None:
    a = SideRun("A", 0, 0, 1.0, outcomes=[
        _outcome("same"), _outcome("slow"), _outcome("gone"), _outcome("broken"),
        _outcome("never", "skipped", detail="needs CUDA"), _outcome("recompiles"),
    ])  # fmt: skip
    b = SideRun("B", 0, 1, 1.0, outcomes=[
        _outcome("same"), _outcome("slow", median=2e-3), _outcome("broken", "failed", detail="output: max abs error 1"),
        _outcome("never", "skipped", detail="needs CUDA"), _outcome("recompiles"), _outcome("new"),
    ])  # fmt: skip
    comparisons = {c.case: c for c in compare_runs([a], [b])}
    verdicts = {case: c.verdict for case, c in comparisons.items()}
    assert verdicts == {
        "same": "no change", "slow": "slower", "gone": "gone", "broken": "failed", "never": "skipped",
        "recompiles": "no change", "new": "new",
    }  # fmt: skip
    assert {case for case, c in comparisons.items() if c.regressed} == {"slow", "broken"}
    assert comparisons["broken"].notes() == "B failed: output: max abs error 1"
    assert comparisons["same"].params == {"shape": (2, 3)}
    assert summary_line(list(comparisons.values())) == "1 slower, 2 no change, 1 failed, 1 new, 1 gone, 1 skipped"
    table = render(list(comparisons.values()))
    assert table.splitlines()[0].split() == ["case", "params", "variant", "A", "median", "B", "median", "B/A", "95%",
                                             "CI", "p", "verdict", "notes"]  # fmt: skip


def test_a_side_that_crashed_fails_every_benchmark_of_the_other() -> None:
    a = SideRun("A", 0, 0, 1.0, outcomes=[_outcome("one"), _outcome("two")])
    b = SideRun("B", 0, 2, 1.0, error="exit status 2:\nImportError: no module named compiler")
    comparisons = compare_runs([a], [b])
    assert [c.verdict for c in comparisons] == ["failed", "failed"]
    assert all(c.regressed for c in comparisons)
    assert comparisons[0].notes().startswith("B failed: round 1: fusebench run exit status 2:")
