"""Paired samples: fusebench and a peer timed alternately, so that a machine changing speed between
two measurements does not decide the verdict (fusebench.measure.paired)."""

from __future__ import annotations

import random
import statistics

import pytest
import torch

from fusebench.cases.variants import EAGER
from fusebench.measure.measure import Settings, collect_samples, measure_variant, prepare_case
from fusebench.measure.noise import SPREAD_THRESHOLD
from fusebench.measure.paired import PAIRED_ENV, Runner, paired_wanted, pairs_with, time_paired
from tests.support.fakes import FakeClock, double, tiny_case, variant_from

CPU = torch.device("cpu")


class ShiftingMachine:
    """A timer on a machine whose speed changes: a call's time is its own cost times the machine's
    slowness at that sample (by default 1 for the first `shift_after` samples, 2 after)."""

    def __init__(self, clock: FakeClock, shift_after: int = 0, slowness=None) -> None:
        self.clock, self.samples = clock, 0
        self.slowness = slowness or (lambda sample: 1.0 if sample < shift_after else 2.0)
        self.cost: float = 0.0

    def time(self, run) -> float:
        run()
        factor = self.slowness(self.samples)
        self.samples += 1
        duration = self.cost * factor
        self.clock.advance(duration)
        return duration


def _runner(machine: ShiftingMachine, name: str, cost: float, calls: list[str]) -> Runner:
    def run() -> None:
        machine.cost = cost
        calls.append(name)

    return Runner(name, run)


def test_a_machine_that_slows_between_two_measurements_does_not_decide_the_paired_ratio() -> None:
    clock = FakeClock()
    machine = ShiftingMachine(clock, shift_after=10)
    calls: list[str] = []
    ours, peer = _runner(machine, "fusebench", 1.0, calls), _runner(machine, "torch.compile", 1.2, calls)
    # apart: the peer's block ran at full speed, ours after the machine halved it
    theirs = collect_samples(peer.run, lambda: None, machine, clock, 10.0, 10, 20)
    mine = collect_samples(ours.run, lambda: None, machine, clock, 10.0, 10, 20)
    apart = statistics.median(mine) / statistics.median(theirs)
    assert apart == pytest.approx(2.0 / 1.2)  # fusebench looks 1.67x slower; it is 1.2x faster
    paired = time_paired(ours, peer, lambda: None, machine, clock, budget_s=20.0, min_pairs=5, max_pairs=100)
    assert paired.ratio == pytest.approx(1.0 / 1.2)
    assert paired.other == "torch.compile" and paired.pairs >= 5
    assert paired.spread == pytest.approx(0.0)


def test_pairs_alternate_which_side_goes_first_after_two_untimed_calls_each() -> None:
    clock = FakeClock()
    machine = ShiftingMachine(clock, shift_after=10**9)  # a steady machine
    calls: list[str] = []
    ours, peer = _runner(machine, "A", 1.0, calls), _runner(machine, "B", 1.0, calls)
    befores: list[int] = []
    time_paired(ours, peer, lambda: befores.append(1), machine, clock, budget_s=0.0, min_pairs=4, max_pairs=4)
    assert calls == ["A", "A", "B", "B"] + ["A", "B", "B", "A", "A", "B", "B", "A"]
    assert len(befores) == len(calls)  # inputs restored (and caches flushed) before every call
    assert machine.samples == 8  # the warm-up calls are not timed


def test_a_machine_that_changes_speed_within_pairs_shows_in_their_spread() -> None:
    clock = FakeClock()
    speeds = random.Random(0)
    machine = ShiftingMachine(clock, slowness=lambda sample: 1.0 + 2.0 * speeds.random())
    ours, peer = _runner(machine, "fusebench", 1.0, []), _runner(machine, "eager", 1.0, [])
    paired = time_paired(ours, peer, lambda: None, machine, clock, budget_s=0.0, min_pairs=40, max_pairs=40)
    assert paired.spread is not None and paired.spread > SPREAD_THRESHOLD
    assert paired.to_json() == {"ratio": paired.ratio, "spread": paired.spread, "pairs": 40}
    steady = ShiftingMachine(clock, slowness=lambda sample: 1.0)
    quiet = time_paired(*(_runner(steady, n, 1.0, []) for n in ("fusebench", "eager")), lambda: None, steady, clock,
                        budget_s=0.0, min_pairs=40, max_pairs=40)  # fmt: skip
    assert quiet.spread == pytest.approx(0.0) and quiet.ratio == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("one", "other", "paired"),
    [
        ("fusebench", "eager", True),
        ("torch.compile", "fusebench", True),
        ("fusebench", "thunder", True),
        ("fusebench", "fusebench-torch", False),  # both ours: no verdict between them
        ("eager", "torch.compile", False),  # both peers
        ("fusebench-dynamo", "torch.compile", False),  # the verdict is about `fusebench`
    ],
)
def test_which_variants_a_verdict_pairs(one: str, other: str, paired: bool) -> None:
    assert pairs_with(one, other) is paired


def _measure_all(variants, paired: bool = True):
    settings = Settings(device=CPU, budget_s=0.01, min_repeats=3, paired=paired)
    case = tiny_case()
    prepared = prepare_case("tiny", case, case.grid(quick=True)[0], settings)
    return prepared, [measure_variant(prepared, variant, settings) for variant in variants]


def test_fusebench_is_paired_with_the_peers_measured_before_and_after_it() -> None:
    ours = variant_from("fusebench", lambda target: double)
    torch_only = variant_from("fusebench-torch", lambda target: double)
    peer = variant_from("torch.compile", lambda target: double)
    prepared, outcomes = _measure_all([EAGER, ours, torch_only, peer])
    eager, fusebench, fusebench_torch, later_peer = outcomes
    assert all(o.status == "ok" for o in outcomes), [o.detail for o in outcomes]
    assert "paired" not in eager.extra and "paired" not in fusebench_torch.extra
    assert set(fusebench.extra["paired"]) == {"eager"}
    assert set(later_peer.extra["paired"]) == {"fusebench"}  # a peer after fusebench pairs with it
    assert fusebench.extra["paired"]["eager"]["pairs"] >= 3 and fusebench.extra["paired"]["eager"]["ratio"] > 0
    assert "paired" in fusebench.extra["phases"]
    assert [runner.variant for runner in prepared.runners] == ["eager", "fusebench", "torch.compile"]
    entry = fusebench.extra["paired"]["eager"]
    assert fusebench.paired_ratios() == {"eager": (entry["ratio"], entry["spread"])}  # what reports read
    assert eager.paired_ratios() == {}


def test_paired_ratios_read_only_positive_finite_ratios() -> None:
    _, (outcome,) = _measure_all([EAGER], paired=False)
    outcome.extra["paired"] = {
        "eager": {"ratio": 0.8, "spread": 0.05, "pairs": 9},
        "thunder": {"ratio": float("nan"), "spread": None, "pairs": 0},
        "torch.compile": {"ratio": 0, "spread": None, "pairs": 3},
        "inductor": "not an entry",
        "fusebench-dynamo": {"ratio": 1.5, "spread": "wide", "pairs": 4},
    }
    assert outcome.paired_ratios() == {"eager": (0.8, 0.05), "fusebench-dynamo": (1.5, None)}


def test_without_paired_nothing_is_kept_or_paired() -> None:
    prepared, outcomes = _measure_all([EAGER, variant_from("fusebench", lambda target: double)], paired=False)
    assert all("paired" not in o.extra for o in outcomes)
    assert prepared.runners == []


def test_a_failed_variant_is_not_paired() -> None:
    wrong = variant_from("fusebench", lambda target: lambda x: x * 3)
    prepared, (_eager, fusebench) = _measure_all([EAGER, wrong])
    assert fusebench.status == "failed" and "paired" not in fusebench.extra
    assert [runner.variant for runner in prepared.runners] == ["eager"]


def test_paired_samples_are_taken_unless_the_flag_or_the_environment_says_not(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PAIRED_ENV, raising=False)
    assert paired_wanted(no_paired=False) and not paired_wanted(no_paired=True)
    monkeypatch.setenv(PAIRED_ENV, "0")
    assert not paired_wanted(no_paired=False)
