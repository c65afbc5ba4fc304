"""The decision rule of `fusebench compare` and the verdicts of paired measurements (more in
tests/harness/compare/test_verdicts.py)."""

from __future__ import annotations

import numpy as np
import pytest

from fusebench.compare.comparison import compare_runs, render, summary_line
from fusebench.compare.decide import DecisionSettings, decide, t_quantile, t_two_sided_p
from fusebench.compare.interleave import SideRun
from fusebench.errors import FusebenchError

RNG = np.random.default_rng(7)


def _rounds(rng: np.random.Generator, center: float, rounds: int, drift: float, noise: float, n: int = 200) -> list:
    """`rounds` processes: each shifted by its own drift (sd `drift`), samples with noise `noise`."""
    return [list(center * (1 + drift * rng.standard_normal()) * rng.lognormal(0, noise, n)) for _ in range(rounds)]


def test_identical_samples_are_no_change_with_p_1() -> None:
    decision = decide([[1.0] * 10, [1.0] * 5], [[1.0] * 10])
    assert (decision.ratio, decision.p_value, decision.verdict) == (1.0, 1.0, "no change")


def test_t_distribution_matches_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    for t in [0.0, 0.01, 0.5, 2.0, 3.0, 10.0, 1e4]:
        for dof in [1.0, 1.5, 2.0, 4.0, 7.3, 30.0, 1000.0]:
            assert t_two_sided_p(t, dof) == pytest.approx(2 * stats.t.sf(t, dof), rel=1e-9, abs=1e-15)
    for dof in [1.0, 2.0, 4.5, 100.0]:
        assert t_quantile(0.975, dof) == pytest.approx(stats.t.ppf(0.975, dof), rel=1e-9)


def test_a_revision_against_itself_with_round_to_round_drift_flags_nothing() -> None:
    rng = np.random.default_rng(11)
    sides = [(_rounds(rng, 1e-3, 3, 0.02, 0.01), _rounds(rng, 1e-3, 3, 0.02, 0.01)) for _ in range(100)]
    decisions = [decide(a, b) for a, b in sides]
    assert not [d.verdict for d in decisions if d.verdict in ("slower", "faster")]
    assert sum(d.p_value < 0.05 for d in decisions) <= 10  # calibrated: about 5 of 100 by chance
    # NOTE: the samples pooled as if independent (one "round") call most A/A pairs significant.
    pooled = [decide([np.concatenate(a)], [np.concatenate(b)]) for a, b in sides]
    assert sum(d.p_value < 0.01 for d in pooled) >= 50


def test_a_ten_percent_slowdown_of_one_benchmark_is_flagged_and_only_it() -> None:
    rng = np.random.default_rng(5)
    slowdown = {7: 1.10}
    verdicts = []
    for benchmark in range(20):
        a = _rounds(rng, 1e-4 * (1 + benchmark), 6, 0.01, 0.02)
        b = _rounds(rng, 1e-4 * (1 + benchmark) * slowdown.get(benchmark, 1.0), 6, 0.01, 0.02)
        verdicts.append(decide(a, b).verdict)
    assert verdicts == ["slower" if i in slowdown else "no change" for i in range(20)]


def test_round_drift_hides_what_the_samples_alone_would_call_significant() -> None:
    rng = np.random.default_rng(3)
    a = [list(1.0 * rng.lognormal(0, 0.001, 500)), list(1.08 * rng.lognormal(0, 0.001, 500))]
    b = [list(1.0 * rng.lognormal(0, 0.001, 500)), list(1.0 * rng.lognormal(0, 0.001, 500))]
    decision = decide(a, b)
    assert decision.verdict == "noisy"  # one slow round of A is no evidence that B is faster
    assert decision.p_value > 0.05


def test_a_significant_change_must_also_be_large_enough() -> None:
    a = _rounds(RNG, 100, 5, 0.001, 0.01)
    scaled = lambda factor: [[x * factor for x in r] for r in a]
    small = decide(a, scaled(1.02))  # consistent, 2%: under the 5% minimum effect
    assert small.p_value < 0.01 and small.verdict == "no change"
    assert decide(a, scaled(1.02), DecisionSettings(min_effect=0.01)).verdict == "slower"
    assert decide(a, scaled(1.2)).verdict == "slower"
    assert decide(a, scaled(1 / 1.2)).verdict == "faster"


def test_few_noisy_samples_are_too_noisy_to_decide_whatever_the_ratio() -> None:
    assert decide([[1.0, 3.0, 2.0]], [[2.5, 1.5, 4.0]]).verdict == "noisy"
    assert decide([[1.0], [1.5]], [[1.4], [1.9]]).verdict == "noisy"


def test_the_interval_covers_the_true_ratio_about_95_times_in_100() -> None:
    rng = np.random.default_rng(13)  # NOTE: its own draws: the module's RNG depends on which tests ran first
    covered, widths = 0, []
    for _ in range(100):
        a, b = _rounds(rng, 1.0, 4, 0.01, 0.2), _rounds(rng, 1.5, 4, 0.01, 0.2)
        decision = decide(a, b, DecisionSettings(alpha=0.05))
        covered += decision.ci_low < 1.5 < decision.ci_high
        widths.append(decision.ci_high - decision.ci_low)
    assert 88 <= covered <= 100
    assert np.quantile(widths, 0.95) < 0.3 and max(widths) < 0.5  # narrow: 20% noise, 4 rounds of 200


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
    assert table.splitlines()[0].split() == ["case", "params", "variant", "A", "time", "B", "time", "B/A", "99%",
                                             "CI", "p", "verdict", "notes"]  # fmt: skip


def test_a_side_that_crashed_fails_every_benchmark_of_the_other() -> None:
    a = SideRun("A", 0, 0, 1.0, outcomes=[_outcome("one"), _outcome("two")])
    b = SideRun("B", 0, 2, 1.0, error="exit status 2:\nImportError: no module named compiler")
    comparisons = compare_runs([a], [b])
    assert [c.verdict for c in comparisons] == ["failed", "failed"]
    assert all(c.regressed for c in comparisons)
    assert comparisons[0].notes().startswith("B failed: round 1: fusebench run exit status 2:")
