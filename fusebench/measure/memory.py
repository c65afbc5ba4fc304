"""Peak memory of one measurement: device memory allocated by it, and the measuring process's RSS.

Both figures cover the whole measurement (preparing the variant and compiling it, the checked
first call, warm-up, timed repeats, counters), and only it:

- device (CUDA): torch's peak-allocation counter is reset when the measurement begins; the
  figure is the peak of `torch.cuda.max_memory_allocated` above what was allocated at that moment.
  The case's inputs, its reference result and what earlier measurements left allocated are not
  counted: it is the memory the variant itself needed (outputs, intermediates, saved activations,
  workspaces), which is what decides how large a batch fits. None on CPU. What earlier
  measurements left unreachable (a model in reference cycles) is collected before the start is
  read: freed by a collection during the measurement, it would hide as much of its peak.
- host: the process's peak resident set size during the measurement, in bytes. Linux keeps one
  high-water mark per process (`VmHWM`, what `getrusage` reports as `ru_maxrss`); writing 5 to
  `/proc/self/clear_refs` resets it to the current RSS, so the mark read at the end is this
  measurement's peak. Where that file cannot be written (not Linux, a locked-down /proc), the
  lifetime maximum is the peak only if it rose during the measurement; otherwise the peak is
  unknown (None) rather than an earlier measurement's.
"""

from __future__ import annotations

import gc
import re
import resource
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

CLEAR_REFS = Path("/proc/self/clear_refs")
STATUS = Path("/proc/self/status")
RESET_HIGH_WATER_MARK = "5"  # see proc(5), /proc/pid/clear_refs


@dataclass(frozen=True)
class PeakMemory:
    """A measurement's peaks in bytes (None where not measurable here)."""

    device_bytes: int | None
    host_rss_bytes: int | None


class MemoryWatch:
    """Resets the peak counters on `start()`; `stop()` reads this interval's peaks."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._allocated_at_start = 0
        self._host_reset = False
        self._lifetime_rss_at_start = 0

    def start(self) -> None:
        """Begins the interval (synchronizes the device first, so earlier work is not counted)."""
        if self.device.type == "cuda":
            gc.collect()
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._allocated_at_start = torch.cuda.memory_allocated(self.device)
        self._host_reset = _reset_high_water_mark()
        self._lifetime_rss_at_start = lifetime_peak_rss_bytes()

    def stop(self) -> PeakMemory:
        """The peaks since `start()`."""
        device_bytes = None
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            device_bytes = max(torch.cuda.max_memory_allocated(self.device) - self._allocated_at_start, 0)
        return PeakMemory(device_bytes, self._host_peak())

    def _host_peak(self) -> int | None:
        if self._host_reset:
            mark = high_water_mark_bytes()
            if mark is not None:
                return mark
        lifetime = lifetime_peak_rss_bytes()
        return lifetime if lifetime > self._lifetime_rss_at_start else None


def high_water_mark_bytes() -> int | None:
    """The process's peak RSS since it started or since the mark was last reset (Linux), or None."""
    try:
        match = re.search(r"^VmHWM:\s+(\d+)\s+kB", STATUS.read_text(encoding="ascii"), re.MULTILINE)
    except OSError:
        return None
    return int(match.group(1)) * 1024 if match else None


def lifetime_peak_rss_bytes() -> int:
    """`getrusage`'s maximum RSS of this process over its life, in bytes."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # NOTE: macOS reports bytes, Linux kB


def _reset_high_water_mark() -> bool:
    try:
        CLEAR_REFS.write_text(RESET_HIGH_WATER_MARK, encoding="ascii")
    except OSError:
        return False
    return True
