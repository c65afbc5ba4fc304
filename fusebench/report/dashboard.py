"""The dashboard headline: per variant (compiler) and suite, how often it passes, how much faster
than eager it is, how long it compiles and how much memory it needs next to eager, the four
numbers PyTorch's inductor performance dashboard shows per compiler and suite.

- pass rate: the (case, params) whose result matched the reference (`ok`) over those it was
  measured on; a variant that cannot run here (`skipped`) is not counted, `unsupported`, `failed`,
  `error` and `crashed` count as not passing;
- speedup: the geometric mean over the (case, params) that both eager and the variant timed of
  eager's time over the variant's (> 1×: faster than eager; eager itself is 1×). Where a run timed
  the variant alternately with eager, or `fusebench` alternately with both (fusebench/measure/paired.py),
  the ratio comes from those pairs (`fusebench` and its peers: the same pairs as the run's verdict
  lines), so a machine that changed speed between two measurements does not decide it;
- compile time: the mean of the variant's compile seconds over its ok measurements;
- memory ratio: the geometric mean of eager's peak device memory over the variant's (PyTorch's
  "compression ratio": > 1× means it needs less memory than eager), over the (case, params) where
  both allocated device memory (CUDA; none on CPU).

A suite whose cases name a `mode` (Case.mode: inference, training, decode, as in PyTorch's
dashboard) gets one row per mode (`hf_zoo/training`), its other cases one without a mode.

The same numbers come from one run's outcomes (`fusebench run` prints them first in its summary)
and from a results DataFrame: the latest measurement of each series (the report's headline) or
each commit on its own (`dashboard_history`, the headline's history over commits). A results file
keeps each outcome's pairs (`fusebench.history.results`), so the report's dashboard gives the run's
paired speedups too.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from fusebench.cases.case import format_params
from fusebench.cases.discovery import Suite, discover
from fusebench.cases.variants import OURS
from fusebench.errors import SuiteError
from fusebench.measure.outcome import COMPILE, PEAK_DEVICE, TIME, Outcome, paired_ratios
from fusebench.report.scoreboard import variant_order
from fusebench.report.summary import format_ratio

EAGER = "eager"
NOT_COUNTED = ("skipped", "missing")  # statuses that say nothing about the variant
HISTORY_COLUMNS = ["machine", "env", "commit", "date", "suite", "variant", "pass_rate", "speedup", "compile_seconds",
                   "memory_ratio"]  # fmt: skip


@dataclass(frozen=True)
class Measurement:
    """What the dashboard needs of one (suite, case, params, variant) measurement."""

    suite: str
    case: str
    params: str
    variant: str
    status: str
    seconds: float | None = None
    compile_seconds: float | None = None
    peak_device_bytes: float | None = None
    paired: tuple[tuple[str, float], ...] = ()  # (other variant, this one's time over the other's), timed alternately
    mode: str | None = None  # the case's `Case.mode`

    @property
    def group(self) -> str:
        """The dashboard row's suite column: the suite, with the case's mode where it has one."""
        return f"{self.suite}/{self.mode}" if self.mode else self.suite


Modes = Mapping[tuple[str, str], str]  # (suite, case) -> the case's mode


def case_modes(suites: Iterable[Suite]) -> dict[tuple[str, str], str]:
    """(suite, case) -> mode of the discovered `suites`' cases that name one."""
    return {(suite.name, case.name): case.mode for suite in suites for case in suite.cases if case.mode}


@functools.cache
def bundled_modes() -> Modes:
    """`case_modes` of the bundled suites ({} where they cannot be found): what a report of results
    files, which keep no case metadata, groups by (found once per process: a report has a
    dashboard per machine)."""
    try:
        return case_modes(discover())
    except SuiteError:
        return {}


@dataclass(frozen=True)
class DashboardEntry:
    """The headline numbers of one variant on one suite (None where nothing could be compared)."""

    suite: str
    variant: str
    measured: int  # (case, params) it was measured on, skipped ones left out
    passed: int
    speedup: float | None
    compile_seconds: float | None
    memory_ratio: float | None

    @property
    def pass_rate(self) -> float | None:
        """passed / measured, None when it was measured on nothing."""
        return self.passed / self.measured if self.measured else None


def measurements_from_outcomes(outcomes: Iterable[Outcome], modes: Modes | None = None) -> list[Measurement]:
    """One run's outcomes as dashboard measurements (each case's mode from `modes`)."""
    modes = modes or {}
    return [
        Measurement(
            suite=o.suite,
            case=o.case,
            params=format_params(o.params),
            variant=o.variant,
            status=o.status,
            seconds=o.timing.median if o.status == "ok" and o.timing is not None else None,
            compile_seconds=o.compile_seconds if o.status == "ok" else None,
            peak_device_bytes=o.peak_device_bytes if o.status == "ok" else None,
            paired=tuple((other, ratio) for other, (ratio, _) in o.paired_ratios().items()) if o.status == "ok" else (),
            mode=modes.get((o.suite, o.case)),
        )
        for o in outcomes
    ]


def measurements_from_frame(frame: pd.DataFrame, modes: Modes | None = None) -> list[Measurement]:
    """The measurements of a `read_results` DataFrame, one per (commit, suite, case, params,
    variant) with a status (each case's mode from `modes`); the caller picks the machine,
    environment and commits."""
    modes = modes or {}
    times = frame[(frame.metric == TIME.name) & (frame.status != "missing")]
    if times.empty:
        return []
    key = ["machine", "env", "commit", "suite", "case", "params", "variant"]
    extras = frame[frame.metric.isin([COMPILE.name, PEAK_DEVICE.name]) & frame.value.notna()]
    # (*series, metric) -> value, for the compile time and peak memory beside each time
    values = {tuple(row[:-1]): row[-1] for row in extras[[*key, "metric", "value"]].itertuples(index=False)}
    if "paired" not in times:  # NOTE: a frame built without the column (results read by an older version)
        times = times.assign(paired=None)
    measurements = []
    for row in times[[*key, "status", "value", "paired"]].itertuples(index=False):
        series = tuple(row[: len(key)])
        ok = row.status == "ok" and not pd.isna(row.value)
        measurements.append(
            Measurement(
                suite=str(row.suite),
                case=str(row.case),
                params=str(row.params),
                variant=str(row.variant),
                status=str(row.status),
                seconds=float(row.value) if ok else None,
                compile_seconds=_float(values.get((*series, COMPILE.name))) if ok else None,
                peak_device_bytes=_float(values.get((*series, PEAK_DEVICE.name))) if ok else None,
                paired=tuple((other, ratio) for other, (ratio, _) in paired_ratios(row.paired).items()) if ok else (),
                mode=modes.get((str(row.suite), str(row.case))),
            )
        )
    return measurements


def dashboard(measurements: Sequence[Measurement]) -> list[DashboardEntry]:
    """One entry per (suite, variant) measured on something (per suite and mode where cases name
    one: `Measurement.group`), suites by name, variants in the scoreboard's order."""
    eager = {(m.suite, m.case, m.params): m for m in measurements if m.variant == EAGER}
    pairs = _pairs(measurements)
    groups: dict[tuple[str, str], list[Measurement]] = {}
    for measurement in measurements:
        if measurement.status not in NOT_COUNTED:
            groups.setdefault((measurement.group, measurement.variant), []).append(measurement)
    order = {name: index for index, name in enumerate(variant_order(v for _, v in groups))}
    entries = []
    for (suite, variant), group in sorted(groups.items(), key=lambda item: (item[0][0], order[item[0][1]])):
        speedups, memory, compile_times = [], [], []
        for m in group:
            reference = eager.get((m.suite, m.case, m.params))
            if m.compile_seconds is not None:
                compile_times.append(m.compile_seconds)
            if reference is None:
                continue
            if _positive(reference.seconds) and _positive(m.seconds):
                paired = _paired_ratio(pairs.get((m.suite, m.case, m.params), {}), m.variant)
                speedups.append(1 / paired if paired is not None else reference.seconds / m.seconds)  # type: ignore[operator]
            if _positive(reference.peak_device_bytes) and _positive(m.peak_device_bytes):
                memory.append(reference.peak_device_bytes / m.peak_device_bytes)  # type: ignore[operator]
        entries.append(
            DashboardEntry(
                suite=suite,
                variant=variant,
                measured=len(group),
                passed=sum(m.status == "ok" for m in group),
                speedup=geometric_mean(speedups),
                compile_seconds=sum(compile_times) / len(compile_times) if compile_times else None,
                memory_ratio=geometric_mean(memory),
            )
        )
    return entries


def _pairs(measurements: Sequence[Measurement]) -> dict[tuple[str, str, str], dict[tuple[str, str], float]]:
    """(suite, case, params) -> (variant a, variant b) -> a's time over b's, timed alternately
    (each pair both ways round)."""
    pairs: dict[tuple[str, str, str], dict[tuple[str, str], float]] = {}
    for m in measurements:
        for other, ratio in m.paired:
            row = pairs.setdefault((m.suite, m.case, m.params), {})
            row[(m.variant, other)], row[(other, m.variant)] = ratio, 1 / ratio
    return pairs


def _paired_ratio(row: dict[tuple[str, str], float], variant: str) -> float | None:
    """`variant`'s time over eager's from the row's pairs: timed alternately with eager, or through
    `fusebench` timed alternately with both; None where the pairs do not say."""
    if (variant, EAGER) in row:
        return row[(variant, EAGER)]
    if (variant, OURS) in row and (OURS, EAGER) in row:
        return row[(variant, OURS)] * row[(OURS, EAGER)]
    return None


def latest_measurements(frame: pd.DataFrame, modes: Modes | None = None) -> list[Measurement]:
    """The newest measurement of every series of a DataFrame of ONE machine and environment (as the
    scoreboard takes them), so a run of some suites does not hide the others' latest numbers."""
    times = frame[(frame.metric == TIME.name) & (frame.status != "missing")]
    if times.empty:
        return []
    series = ["suite", "case", "params", "variant"]
    latest = times.sort_values(["date", "commit"], kind="stable").drop_duplicates(series, keep="last")
    wanted = frame.merge(latest[[*series, "commit"]], on=[*series, "commit"])
    return measurements_from_frame(wanted, modes)


def dashboard_history(frame: pd.DataFrame, modes: Modes | None = None) -> pd.DataFrame:
    """The dashboard of every commit on its own, per machine and environment (HISTORY_COLUMNS),
    ordered by commit date."""
    rows = []
    for (machine, env, commit), commit_frame in frame.groupby(["machine", "env", "commit"], sort=False):
        date = commit_frame.date.max()
        for entry in dashboard(measurements_from_frame(commit_frame, modes)):
            rows.append(
                [machine, env, commit, date, entry.suite, entry.variant, entry.pass_rate, entry.speedup,
                 entry.compile_seconds, entry.memory_ratio]
            )  # fmt: skip
    history = pd.DataFrame(rows, columns=HISTORY_COLUMNS)
    return history.sort_values(["machine", "env", "date", "commit"], kind="stable", ignore_index=True)


def render_dashboard(entries: Sequence[DashboardEntry]) -> str:
    """The headline as a text table ('' when there are no entries)."""
    if not entries:
        return ""
    headers = ["variant", "suite", "pass rate", "speedup", "compile s", "memory ratio"]
    rows = [headers] + [
        [
            entry.variant,
            entry.suite,
            pass_rate_text(entry),
            format_ratio(entry.speedup),
            "-" if entry.compile_seconds is None else f"{entry.compile_seconds:.3f}",
            format_ratio(entry.memory_ratio),
        ]
        for entry in entries
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(headers))]
    lines = [
        "  ".join(cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths))).rstrip()
        for row in rows
    ]
    title = (
        "dashboard (per variant and suite, or suite/mode; speedup and memory ratio are geometric means of eager's "
        "over the variant's, > 1× is better; speedups from samples timed alternately where the run took them)"
    )
    return "\n".join([title, lines[0], "  ".join("-" * w for w in widths), *lines[1:]])


def pass_rate_text(entry: DashboardEntry) -> str:
    """'3/4 75%' ('-' when measured on nothing)."""
    if entry.pass_rate is None:
        return "-"
    return f"{entry.passed}/{entry.measured} {100 * entry.pass_rate:.0f}%"


def geometric_mean(values: Sequence[float]) -> float | None:
    """The geometric mean of positive `values`, None for none."""
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def _positive(value: float | None) -> bool:
    return value is not None and not math.isnan(value) and value > 0


def _float(value: object) -> float | None:
    return None if value is None or pd.isna(value) else float(value)  # type: ignore[arg-type]
