"""The search of `fusebench bisect` with an injected comparator: known histories, known verdicts."""

from __future__ import annotations

from fusebench.compare.bisect import StepVerdict, bisect
from fusebench.compare.decide import MAX_ROUNDS

COMMITS = [f"{index:02d}" + "c" * 38 for index in range(10)]
GOOD = "g" * 40


def _history(first_slow: dict[str, int], noisy: dict[tuple[str, int], int] | None = None, calls: list | None = None):
    """A comparator: benchmark `key` is slower from commit index `first_slow[key]` on; a commit in
    `noisy` reads noisy below the given number of rounds (asking for that many)."""

    def comparator(commit: str, rounds: int) -> dict:
        if calls is not None:
            calls.append((commit, rounds))
        index = COMMITS.index(commit)
        verdicts = {}
        for key, first in first_slow.items():
            needed = (noisy or {}).get((key, index))
            if needed is not None and rounds < needed:
                verdicts[key] = StepVerdict("noisy", needed)
            else:
                verdicts[key] = StepVerdict("slower" if index >= first else "no change")
        return verdicts

    return comparator


def test_the_first_slow_commit_among_ten_is_found_in_log2_steps() -> None:
    for first in range(10):
        calls: list = []
        [result] = bisect(GOOD, COMMITS, ["case"], _history({"case": first}, calls=calls), rounds=3)
        assert result.first_slower == COMMITS[first] and not result.undecided
        assert result.last_good == (COMMITS[first - 1] if first else GOOD)
        assert len(calls) <= 4  # ceil(log2(10)): BAD itself is known slower


def test_a_noisy_step_is_measured_again_with_the_rounds_it_asked_for() -> None:
    calls: list = []
    comparator = _history({"case": 6}, noisy={("case", 4): 9}, calls=calls)
    [result] = bisect(GOOD, COMMITS, ["case"], comparator, rounds=3, retries=2)
    assert result.first_slower == COMMITS[6]
    assert (COMMITS[4], 3) in calls and (COMMITS[4], 9) in calls
    assert [(s.commit, s.rounds, s.verdict) for s in result.steps][:2] == [
        (COMMITS[4], 3, "noisy"),
        (COMMITS[4], 9, "no change"),
    ]


def test_a_step_still_noisy_after_its_retries_stops_with_the_bracket() -> None:
    comparator = _history({"case": 6}, noisy={("case", 4): 1000})
    [result] = bisect(GOOD, COMMITS, ["case"], comparator, rounds=3, retries=1)
    assert result.first_slower is None
    assert result.bracket == (GOOD, COMMITS[9]) and "stayed noisy after 1 retries" in result.undecided
    assert [s.rounds for s in result.steps] == [3, MAX_ROUNDS]  # what it asked for, at most MAX_ROUNDS


def test_benchmarks_bisected_together_share_the_commits_they_both_visit() -> None:
    calls: list = []
    results = bisect(GOOD, COMMITS, ["one", "two"], _history({"one": 3, "two": 3}, calls=calls), rounds=2)
    assert [r.first_slower for r in results] == [COMMITS[3], COMMITS[3]]
    assert len(calls) == len(set(calls)) == len(results[0].steps)
