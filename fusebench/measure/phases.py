"""Where a measurement's wall time goes: seconds per phase, for `fusebench run --profile-overhead`.

A measurement's phases: `prepare_case` (inputs and reference, paid by the first variant of each
(case, params) in a process), `prepare` (the variant wraps or compiles the function lazily),
`first_call` (the first call, compilation included), `check` (against the reference),
`warmup` and `samples` (the repeat budget), `counters` (kernels with torch.profiler, fusions),
`record` (the compiler's record: trace, fusion definitions, nvFuser segments), `write` (the
results and records written to disk) and `turn_wait` (waiting for the device, where several
workers share one: `fusebench.measure.turns`). They are kept in `Outcome.extra["phases"]`; other
facts about how the measurement ran (`facts`: how many other workers its timed repeats stopped) in
`Outcome.extra` itself.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

PHASES = (
    "prepare_case", "prepare", "first_call", "check", "warmup", "samples", "counters", "record", "write", "turn_wait"
)  # fmt: skip


class Phases:
    """Accumulates the wall seconds of named phases."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.facts: dict[str, int] = {}  # e.g. "workers_stopped": the others stopped while it timed

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Adds the wall time of the block to phase `name`."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - start)

    def add(self, name: str, seconds: float) -> None:
        """Adds `seconds` to phase `name`."""
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds
