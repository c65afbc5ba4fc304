"""The flags of how two revisions are measured and judged, shared by `fusebench compare` and
`fusebench bisect` (one definition, so the two commands cannot drift apart): rounds, repeat budget,
follow-up rounds' cap, minimum effect, alpha, the rounds' quantile, threads, segment profiling and the repository;
`options_from_args` checks them (a bad value: one line naming the flag and its allowed range)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from fusebench.cases.selection import Selection
from fusebench.compare.decide import MAX_ROUNDS, DecisionSettings
from fusebench.compare.looks import LookSchedule
from fusebench.errors import check
from fusebench.measure.threads import add_threads_argument, checked_threads

DEFAULT_ROUNDS = 6
# NOTE: four times the planned rounds is two follow-up looks (the rounds double: 6, 12, 24), the
# last with half the first's standard error and a far smaller t quantile, which decides a row whose
# interval was about twice too wide, in spite of the alpha the later looks give up
# (fusebench.compare.looks); only noisy rows are measured again, which bounds the extra time.
DEFAULT_MAX_ROUNDS_FACTOR = 4
# NOTE: on CUDA a round's samples of a device-timed kernel agree closely, so a short budget per round
# keeps the power; the rounds carry the drift between processes that the interval must see (check
# on a machine: `python -m scripts.compare_power --decide-again DIR --sample-fraction F`).
DEFAULT_BUDGET_S = {"cpu": 0.2, "cuda": 0.3}
# NOTE: device-timed GPU kernels at full sizes vary far less between processes than host-bound CPU
# timings, so a GPU comparison can resolve (and is asked to catch) smaller changes.
DEFAULT_MIN_EFFECT = {"cpu": 0.05, "cuda": 0.02}


MAX_BUDGET_S = 3600.0
MAX_MIN_EFFECT = 10.0


@dataclass(frozen=True)
class CompareOptions:
    """How two revisions are measured and judged: rounds, seconds of repeats per measurement and round,
    torch's CPU threads in each run, whether the first round profiles nvFuser's segments, the decision,
    and the most rounds a noisy row may get with follow-ups (`max_rounds`; at most `rounds`: none)."""

    rounds: int
    budget_s: float
    threads: int
    segments: bool
    settings: DecisionSettings
    max_rounds: int = 0

    @property
    def schedule(self) -> LookSchedule:
        """When the comparison looks at its samples and the alpha of each look."""
        return LookSchedule(self.rounds, max(self.rounds, self.max_rounds), self.settings.alpha)


def add_decision_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of how revisions are measured and judged (shared by `compare` and `bisect`)."""
    parser.add_argument(
        "--rounds",
        type=int,
        default=DEFAULT_ROUNDS,
        help=f"runs of each side, interleaved (default {DEFAULT_ROUNDS}; 1 to {MAX_ROUNDS})",
    )
    parser.add_argument(
        "--max-rounds",
        type=int,
        metavar="N",
        help=(
            f"rows still noisy after --rounds get follow-up rounds of their own, up to N in all (default "
            f"{DEFAULT_MAX_ROUNDS_FACTOR} times --rounds, at most {MAX_ROUNDS}; --rounds: no follow-ups)"
        ),
    )
    parser.add_argument(
        "--repeat-budget",
        type=float,
        metavar="S",
        help=(
            f"seconds of timed repeats per measurement and round (default {DEFAULT_BUDGET_S['cpu']:g} on CPU, "
            f"{DEFAULT_BUDGET_S['cuda']:g} on CUDA)"
        ),
    )
    parser.add_argument(
        "--min-effect",
        type=float,
        metavar="FRACTION",
        help="smallest change reported as faster/slower (default 0.05 on CPU, 0.02 on CUDA: 5%%, 2%%)",
    )
    parser.add_argument(
        "--alpha",
        type=float,
        default=0.01,
        help="1 - the confidence of the interval that decides (default 0.01: a 99%% interval)",
    )
    parser.add_argument(
        "--quantile",
        type=float,
        default=0.25,
        metavar="Q",
        help="each round's statistic: this quantile of its samples (default 0.25, the lower quartile; 0.5: medians)",
    )
    add_threads_argument(parser)
    parser.add_argument(
        "--no-segments",
        action="store_true",
        help="do not profile nvFuser's kernels per fusion in the first round (GPU; faster, reasons without segments)",
    )
    parser.add_argument("--repo", type=Path, metavar="DIR", help="the git repository (default: the current folder)")


def options_from_args(args: argparse.Namespace, selection: Selection) -> CompareOptions:
    """The checked options; a bad value is a one-line error naming the flag and its allowed range."""
    check(
        1 <= args.rounds <= MAX_ROUNDS,
        lambda: f"--rounds {args.rounds}: expected a whole number of rounds from 1 to {MAX_ROUNDS}",
    )
    max_rounds = (
        args.max_rounds if args.max_rounds is not None else min(DEFAULT_MAX_ROUNDS_FACTOR * args.rounds, MAX_ROUNDS)
    )
    check(
        args.rounds <= max_rounds <= MAX_ROUNDS,
        lambda: (
            f"--max-rounds {max_rounds}: expected a whole number of rounds from --rounds ({args.rounds}) "
            f"to {MAX_ROUNDS} (equal to --rounds: no follow-up rounds)"
        ),
    )
    budget = args.repeat_budget if args.repeat_budget is not None else DEFAULT_BUDGET_S[selection.device.type]
    check(
        0 < budget <= MAX_BUDGET_S,
        lambda: f"--repeat-budget {budget:g}: expected a positive number of seconds, at most {MAX_BUDGET_S:g}",
    )
    check(
        0 < args.alpha < 1,
        lambda: f"--alpha {args.alpha:g}: expected a probability strictly between 0 and 1, like 0.01",
    )
    min_effect = args.min_effect if args.min_effect is not None else DEFAULT_MIN_EFFECT[selection.device.type]
    check(
        0 <= min_effect <= MAX_MIN_EFFECT,
        lambda: f"--min-effect {min_effect:g}: expected a fraction from 0 to {MAX_MIN_EFFECT:g}, like 0.05",
    )
    check(
        0 < args.quantile < 1,
        lambda: f"--quantile {args.quantile:g}: expected a level strictly between 0 and 1, like 0.25",
    )
    threads = checked_threads(args.threads)
    settings = DecisionSettings(min_effect=min_effect, alpha=args.alpha, quantile=args.quantile)
    return CompareOptions(args.rounds, budget, threads, not args.no_segments, settings, max_rounds)
