"""Whether the machine was too noisy for its timings to mean much, judged from control rows.

Control rows are the measurements no commit of this project changes: the `eager` variant runs
PyTorch alone, so its time moves only with the machine (a busy neighbour, threads fighting for
cores, clocks). Three signs, each against its own threshold:
- spread within a run: a control row's interquartile range over its median (a quiet machine keeps
  the samples of one measurement within a few percent; a loaded one spreads them over plateaus);
- a tail of interrupted samples: the fraction of a control row's samples that took more than
  twice its median (the process waited for a core: a plateau of milliseconds that the IQR misses
  while it holds less than a quarter of the samples, and that makes a median jump between runs);
- drift between rounds (`fusebench compare`): the standard deviation of the log of a control
  row's round medians, the same code measured again in a fresh process;
- a shift between measurements (`fusebench run`): where fusebench and a peer were also timed
  alternately (`fusebench.measure.paired`), how far the ratio of their separate measurements is
  from the paired one (the absolute log of the two's ratio): a machine whose speed changed between
  two measurements moves the first and not the second.
A run or comparison is noisy when the median control row (or paired ratio) passes a threshold:
one odd row is the case's own business, most of them moving is the machine's.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from fusebench.cases.case import format_params
from fusebench.measure.outcome import Outcome

CONTROL_VARIANTS = ("eager",)
SPREAD_THRESHOLD = 0.25  # IQR / median of one measurement
TAIL_THRESHOLD = 0.05  # fraction of samples above twice the median
TAIL_FACTOR = 2.0
DRIFT_THRESHOLD = 0.10  # standard deviation of log round medians
SHIFT_THRESHOLD = math.log(1.10)  # |log| of a separate ratio over its paired one: 10% off


@dataclass(frozen=True)
class Noise:
    """The median control row's spread (IQR / median), drift between rounds (None: one round) and
    tail (fraction of samples above twice the median; None without samples), over how many
    control rows, and whether any passes its threshold."""

    spread: float | None
    drift: float | None
    controls: int
    tail: float | None = None
    shift: float | None = None  # the median paired ratio's shift (None: nothing was paired)
    paired: int = 0  # how many paired ratios the shift is the median of

    @property
    def noisy(self) -> bool:
        """Whether the machine was noisy: the median control row (or paired ratio) passes a threshold."""
        return (
            (self.spread is not None and self.spread > SPREAD_THRESHOLD)
            or (self.drift is not None and self.drift > DRIFT_THRESHOLD)
            or (self.tail is not None and self.tail > TAIL_THRESHOLD)
            or (self.shift is not None and self.shift > SHIFT_THRESHOLD)
        )

    def line(self) -> str:
        """'machine noisy: eager rows spread 34% (IQR / median) ...' or 'machine quiet: ...'; '' without controls."""
        if not self.controls:
            return ""
        parts = []
        if self.spread is not None:
            parts.append(
                f"spread {self.spread:.0%} within a measurement (IQR / median; noisy above {SPREAD_THRESHOLD:.0%})"
            )
        if self.tail is not None:
            parts.append(
                f"had {self.tail:.0%} of samples above {TAIL_FACTOR:g}x their median (noisy above {TAIL_THRESHOLD:.0%})"
            )
        if self.drift is not None:
            parts.append(f"moved {self.drift:.0%} between rounds (noisy above {DRIFT_THRESHOLD:.0%})")
        text = f"{self.controls} control (eager) rows " + ", ".join(parts)
        if self.shift is not None:
            text += (
                f"; ratios of separate measurements were {math.exp(self.shift) - 1:.0%} off the same "
                f"variants timed alternately (median of {self.paired}; noisy above "
                f"{math.exp(SHIFT_THRESHOLD) - 1:.0%}: a machine whose speed changes between measurements)"
            )
        if not self.noisy:
            return f"machine quiet: {text}"
        return (
            f"machine noisy: {text}; timings may not mean much: stop other work on the machine, keep "
            "--threads 1 (the default), or add rounds"
        )


def is_control(variant: str) -> bool:
    """Whether rows of `variant` are controls (no commit of this project changes their time)."""
    return variant in CONTROL_VARIANTS


def relative_spread(median: float, q25: float, q75: float) -> float | None:
    """IQR / median of one measurement (None for a zero median)."""
    return (q75 - q25) / median if median > 0 else None


def slow_tail(samples: Sequence[float]) -> float | None:
    """The fraction of `samples` above TAIL_FACTOR times their median (None without samples)."""
    if not samples:
        return None
    median = statistics.median(samples)
    return sum(sample > TAIL_FACTOR * median for sample in samples) / len(samples)


def round_drift(round_medians: Sequence[float]) -> float | None:
    """The standard deviation of the logs of one row's round medians (None below two rounds)."""
    positive = [m for m in round_medians if m > 0]
    if len(positive) < 2:
        return None
    return statistics.stdev(math.log(m) for m in positive)


def machine_noise(
    spreads: Sequence[float | None], drifts: Sequence[float | None] = (), tails: Sequence[float | None] = ()
) -> Noise:
    """The noise verdict from the control rows' spreads, (for rounds) drifts and tails."""
    spread_values = [s for s in spreads if s is not None]
    drift_values = [d for d in drifts if d is not None]
    tail_values = [t for t in tails if t is not None]
    return Noise(
        statistics.median(spread_values) if spread_values else None,
        statistics.median(drift_values) if drift_values else None,
        max(len(spread_values), len(drift_values)),
        statistics.median(tail_values) if tail_values else None,
    )


def run_noise(outcomes: Sequence[Outcome]) -> Noise:
    """The noise of one `fusebench run`, from its timed control outcomes and its paired ratios."""
    timings = [o.timing for o in outcomes if o.status == "ok" and o.timing is not None and is_control(o.variant)]
    spreads = [relative_spread(t.median, t.q25, t.q75) for t in timings]
    noise = machine_noise(spreads, tails=[slow_tail(t.samples) for t in timings])
    shifts = paired_shifts(outcomes)
    if not shifts:
        return noise
    return dataclasses.replace(noise, shift=statistics.median(shifts), paired=len(shifts))


def paired_shifts(outcomes: Sequence[Outcome]) -> list[float]:
    """For every paired ratio of the run (`extra["paired"]`) whose two variants were timed apart too:
    |log(separate ratio / paired ratio)|."""
    medians = {
        (o.suite, o.case, format_params(o.params), o.variant): o.timing.median
        for o in outcomes
        if o.status == "ok" and o.timing is not None and o.timing.median > 0
    }
    shifts = []
    for outcome in outcomes:
        row = (outcome.suite, outcome.case, format_params(outcome.params))
        for other, (ratio, _) in outcome.paired_ratios().items():
            mine, theirs = medians.get((*row, outcome.variant)), medians.get((*row, other))
            if mine and theirs:
                shifts.append(abs(math.log(mine / theirs / ratio)))
    return shifts
