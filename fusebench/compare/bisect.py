"""Finding the first commit that made a benchmark slower, as `asv find` does, with compare's verdicts.

The history is the commits after GOOD up to BAD, oldest first (`git rev-list --first-parent`), of
which BAD is known slower than GOOD (compare flagged it). A step measures one commit against GOOD
(`Comparator`: every flagged benchmark at once, `rounds` interleaved rounds) and moves the
benchmark's bracket: slower means the first slower commit is this one or older, anything else
(no change, faster) that it is newer. A noisy step is measured again with the rounds its interval
asked for (at least twice as many), up to `retries` times; still noisy, or failed, the search of
that benchmark stops and says between which two commits the change lies. Measurements are cached
per (commit, rounds), so benchmarks bisected one after another share the commits they both visit.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

from fusebench.compare.decide import MAX_ROUNDS, NOISY, SLOWER


@dataclass(frozen=True)
class StepVerdict:
    """One benchmark at one commit against GOOD: its verdict, and for a noisy one the rounds needed."""

    verdict: str
    rounds_needed: int | None = None


# (commit, rounds) -> each benchmark's verdict at that commit against GOOD
Comparator = Callable[[str, int], dict[Hashable, StepVerdict]]


@dataclass
class Step:
    """One measurement the search of a benchmark used."""

    commit: str
    rounds: int
    verdict: str


@dataclass
class BisectResult:
    """Where a benchmark got slower: `first_slower` (None when undecided), the newest commit known
    not slower (`last_good`, GOOD itself at first), the steps taken and, when undecided, why."""

    key: Hashable
    first_slower: str | None
    last_good: str
    steps: list[Step] = field(default_factory=list)
    undecided: str = ""
    bracket: tuple[str, str] | None = None  # undecided: the change lies after the first, up to the second


class CachedComparator:
    """A comparator whose measurements are kept per (commit, rounds)."""

    def __init__(self, comparator: Comparator) -> None:
        self.comparator = comparator
        self.measured: dict[tuple[str, int], dict[Hashable, StepVerdict]] = {}

    def __call__(self, commit: str, rounds: int) -> dict[Hashable, StepVerdict]:
        if (commit, rounds) not in self.measured:
            self.measured[(commit, rounds)] = self.comparator(commit, rounds)
        return self.measured[(commit, rounds)]


def bisect(
    good: str,
    commits: Sequence[str],
    keys: Sequence[Hashable],
    comparator: Comparator,
    rounds: int,
    retries: int = 2,
) -> list[BisectResult]:
    """For each benchmark in `keys` (slower at `commits[-1]` than at `good`), the first of `commits`
    (oldest first, after `good`) at which it is slower than at `good`."""
    cached = CachedComparator(comparator)
    return [_bisect_one(good, list(commits), key, cached, rounds, retries) for key in keys]


def _bisect_one(
    good: str, commits: list[str], key: Hashable, measure: Comparator, rounds: int, retries: int
) -> BisectResult:
    result = BisectResult(key, None, good)
    low, high = -1, len(commits) - 1  # commits[low] is not slower (-1: GOOD), commits[high] is
    while high - low > 1:
        middle = (low + high) // 2
        verdict = _step(commits[middle], key, measure, rounds, retries, result.steps)
        if verdict == SLOWER:
            high = middle
        elif verdict in (NOISY, "failed", "missing"):
            result.last_good = commits[low] if low >= 0 else good
            result.undecided = (
                f"{commits[middle][:8]} stayed noisy after {retries} retries"
                if verdict == NOISY
                else f"{commits[middle][:8]} could not be measured ({verdict})"
            )
            result.first_slower = None
            result.bracket = (result.last_good, commits[high])
            return result
        else:
            low = middle
    result.first_slower = commits[high]
    result.last_good = commits[low] if low >= 0 else good
    return result


def _step(commit: str, key: Hashable, measure: Comparator, rounds: int, retries: int, steps: list[Step]) -> str:
    """The benchmark's verdict at `commit`, measured again with more rounds while noisy."""
    for attempt in range(retries + 1):
        found = measure(commit, rounds).get(key)
        verdict = found.verdict if found else "missing"
        steps.append(Step(commit, rounds, verdict))
        if verdict != NOISY or attempt == retries or rounds >= MAX_ROUNDS:
            return verdict
        rounds = min(MAX_ROUNDS, max(2 * rounds, found.rounds_needed or 0))
    return verdict
