"""What measuring one (case, params, variant) produced, and the metrics it records.

Statuses:
- ok: the result matched the reference; every metric that applies has a value.
- failed: the result disagreed with the reference (detail: where and the max error); no time.
- unsupported: the variant raised NotImplementedError (detail: its message); no time.
- skipped: the variant cannot run here (detail: why), e.g. nvFuser without CUDA.
- error: anything else went wrong (detail: the exception).
- crashed: the process measuring it died (`--isolate`: a signal or exit status, and the last lines
  of its output in detail), e.g. a segfault in nvFuser or a CUDA error; no time.

Kernels and fusions of a training step (a case with a `forward_call`): `kernels_per_call` counts
every kernel of the step, `kernels_backward` those of its backward (the step's minus the
forward's); `fusions_per_call` counts the fusions of the forward program (of the only program,
for other cases), `fusions_backward` those of the backward program.

Each metric is one ASV benchmark `<suite>.<case>.<metric>` whose parameters are the case's
parameters plus `variant`.

Peak memory (`fusebench.measure.memory`): the device memory the measurement allocated at its peak
above what was allocated when it began (inputs and reference excluded; CUDA only), and the
measuring process's peak RSS during the measurement; both in bytes, recorded as `track_`
benchmarks with unit "bytes".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from fusebench.measure.stats import TimingStats

STATUSES = ("ok", "failed", "unsupported", "skipped", "error", "crashed")
BAD_STATUSES = ("failed", "error", "crashed")  # what makes `fusebench run` exit 1


def paired_ratios(paired: Any) -> dict[str, tuple[float, float | None]]:
    """Ratios of a variant's time to others' timed alternately with it, from their JSON form
    (other variant -> {"ratio", "spread", "pairs"}, as an outcome's `extra["paired"]` and a results
    file keep them): other variant -> (ratio, spread of the pairs' ratios), those whose ratio is
    positive and finite (a results file may hold anything)."""
    found = {}
    for other, entry in (paired if isinstance(paired, dict) else {}).items():
        ratio = entry.get("ratio") if isinstance(entry, dict) else None
        if isinstance(ratio, (int, float)) and math.isfinite(ratio) and ratio > 0:
            spread = entry.get("spread")
            found[str(other)] = (float(ratio), spread if isinstance(spread, (int, float)) else None)
    return found


@dataclass(frozen=True)
class Metric:
    """A recorded quantity: its ASV benchmark name suffix, ASV type and unit."""

    name: str
    kind: str  # "time" or "track", as ASV names benchmark types
    unit: str


TIME = Metric("time_call", "time", "seconds")
COMPILE = Metric("track_compile_seconds", "track", "seconds")
RECOMPILATIONS = Metric("track_recompilations", "track", "recompilations")
BANDWIDTH = Metric("track_bandwidth_gbs", "track", "GB/s")
PEAK_FRACTION = Metric("track_peak_fraction", "track", "fraction of peak")
KERNELS = Metric("track_kernels_per_call", "track", "kernels")
FUSIONS = Metric("track_fusions_per_call", "track", "fusions")
TOKENS = Metric("track_tokens_per_second", "track", "tokens/s")
KERNELS_BACKWARD = Metric("track_kernels_backward", "track", "kernels")
FUSIONS_BACKWARD = Metric("track_fusions_backward", "track", "fusions")
PEAK_DEVICE = Metric("track_peak_device_bytes", "track", "bytes")
PEAK_HOST_RSS = Metric("track_peak_host_rss_bytes", "track", "bytes")
FALLBACKS = Metric("track_fallbacks", "track", "fallbacks")  # pieces our compiler left to eager or torch
METRICS: tuple[Metric, ...] = (
    TIME,
    COMPILE,
    RECOMPILATIONS,
    BANDWIDTH,
    PEAK_FRACTION,
    KERNELS,
    FUSIONS,
    KERNELS_BACKWARD,
    FUSIONS_BACKWARD,
    TOKENS,
    PEAK_DEVICE,
    PEAK_HOST_RSS,
    FALLBACKS,
)
MEMORY_METRICS = (PEAK_DEVICE, PEAK_HOST_RSS)
METRICS_BY_NAME = {metric.name: metric for metric in METRICS}


@dataclass
class Outcome:
    """The measurement of one variant on one parameter combination of one case."""

    suite: str
    case: str
    params: dict[str, Any]
    variant: str
    device: str
    status: str
    detail: str = ""
    timing: TimingStats | None = None
    calls_per_sample: int = 1
    case_version: str = "1"
    compile_seconds: float | None = None
    recompilations: int | None = None
    kernels_per_call: int | None = None
    fusions_per_call: int | None = None
    kernels_backward: int | None = None
    fusions_backward: int | None = None
    fallbacks: int | None = None  # pieces of the program that ran eagerly (variants that know)
    bytes_moved: int | None = None
    peak_bandwidth_gbs: float | None = None
    tokens_per_call: int | None = None  # tokens a call processes (model cases), for tokens/s
    peak_device_bytes: int | None = None  # device memory the measurement allocated at its peak (CUDA)
    peak_host_rss_bytes: int | None = None  # the measuring process's peak RSS during the measurement
    started_at: float = 0.0  # seconds since the epoch
    duration: float = 0.0  # seconds the whole measurement took
    extra: dict[str, Any] = field(default_factory=dict)
    artifacts: dict[str, str] = field(default_factory=dict, repr=False)  # compiler record, not in ASV's JSON

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"outcome status {self.status!r} is not one of {STATUSES}")

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Outcome:
        """The outcome `dataclasses.asdict` wrote (JSON lists back to tuples where the fields are tuples)."""
        fields = dict(data)
        if fields.get("timing") is not None:
            fields["timing"] = TimingStats(**{**fields["timing"], "samples": tuple(fields["timing"]["samples"])})
        return cls(**fields)

    @property
    def bandwidth_gbs(self) -> float | None:
        """Effective bandwidth: bytes model / median time, in GB/s (1e9 bytes per second)."""
        if self.timing is None or self.bytes_moved is None or self.timing.median <= 0:
            return None
        return self.bytes_moved / self.timing.median / 1e9

    @property
    def peak_fraction(self) -> float | None:
        """Effective bandwidth as a fraction of the machine's measured peak."""
        bandwidth = self.bandwidth_gbs
        if bandwidth is None or not self.peak_bandwidth_gbs:
            return None
        return bandwidth / self.peak_bandwidth_gbs

    def paired_ratios(self) -> dict[str, tuple[float, float | None]]:
        """The ratios of this variant's time to others' timed alternately with it
        (`extra["paired"]`, kept by fusebench/measure/paired.py): see `paired_ratios`."""
        return paired_ratios(self.extra.get("paired"))

    @property
    def tokens_per_second(self) -> float | None:
        """Throughput of a model case: tokens per call / median time per call."""
        if self.timing is None or self.tokens_per_call is None or self.timing.median <= 0:
            return None
        return self.tokens_per_call / self.timing.median

    def metric_values(self) -> dict[str, float | int | None]:
        """Value of every metric (None where it does not apply or was not measured)."""
        ok = self.status == "ok"
        return {
            TIME.name: self.timing.median if ok and self.timing else None,
            COMPILE.name: self.compile_seconds if ok else None,
            RECOMPILATIONS.name: self.recompilations if ok else None,
            BANDWIDTH.name: self.bandwidth_gbs if ok else None,
            PEAK_FRACTION.name: self.peak_fraction if ok else None,
            KERNELS.name: self.kernels_per_call if ok else None,
            FUSIONS.name: self.fusions_per_call if ok else None,
            KERNELS_BACKWARD.name: self.kernels_backward if ok else None,
            FUSIONS_BACKWARD.name: self.fusions_backward if ok else None,
            TOKENS.name: self.tokens_per_second if ok else None,
            PEAK_DEVICE.name: self.peak_device_bytes if ok else None,
            PEAK_HOST_RSS.name: self.peak_host_rss_bytes if ok else None,
            FALLBACKS.name: self.fallbacks if ok else None,
        }

    def benchmark_name(self, metric: Metric) -> str:
        """The ASV benchmark this outcome's `metric` is recorded under."""
        return benchmark_name(self.suite, self.case, metric)


def benchmark_version(case_version: str) -> str:
    """The ASV `version` of a case's benchmarks; ASV ignores results recorded under another version."""
    return f"fusebench-{case_version}"


def benchmark_name(suite: str, case: str, metric: Metric) -> str:
    """'<suite>.<case>.<metric>', e.g. 'gelu_backward.gelu_bias_backward.time_call'."""
    return f"{suite}.{case}.{metric.name}"


def split_benchmark_name(name: str) -> tuple[str, str, Metric]:
    """(suite, case, metric) from an ASV benchmark name written by `benchmark_name`."""
    parts = name.rsplit(".", 2)
    if len(parts) != 3 or parts[2] not in METRICS_BY_NAME:
        raise ValueError(
            f"benchmark name {name!r} is not '<suite>.<case>.<metric>' with a metric in {list(METRICS_BY_NAME)}"
        )
    return parts[0], parts[1], METRICS_BY_NAME[parts[2]]
