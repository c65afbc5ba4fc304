"""Clocks for timers that read a clock before and after the timed code (ASV, pytest-benchmark).

`fusebench.measure.timing` times one call given the call; ASV and pytest-benchmark instead call a clock
function `clock() -> seconds` around the code they time and subtract. These clocks make that
subtraction mean what fusebench's timers measure:
- `DeviceClock` on CUDA records a CUDA event and waits for it, and returns the device time
  elapsed since a first event: `clock(); run(); clock()` is the device time between two events,
  as `timing.DeviceTimer` measures it. On CPU it is `time.perf_counter`.
- `WallClock` synchronizes the device, then reads `time.perf_counter`: what a user waits for.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from fusebench.measure.timing import synchronize

Clock = Callable[[], float]


class DeviceClock:
    """Seconds of device time since the clock's first reading (CUDA events); perf_counter on CPU."""

    def __init__(self, device: torch.device | str) -> None:
        self.device = torch.device(device)
        self._origin: torch.cuda.Event | None = None
        # NOTE: named like a function so pytest-benchmark's JSON ("timer") and ASV's logs read well.
        self.__name__ = f"DeviceClock({self.device.type})"

    def __call__(self) -> float:
        if self.device.type != "cuda":
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        event.synchronize()
        if self._origin is None:
            self._origin = event
            return 0.0
        return self._origin.elapsed_time(event) / 1e3


class WallClock:
    """perf_counter read after waiting for the device, so queued work counts as elapsed time."""

    def __init__(self, device: torch.device | str) -> None:
        self.device = torch.device(device)
        self.__name__ = f"WallClock({self.device.type})"

    def __call__(self) -> float:
        synchronize(self.device)
        return time.perf_counter()


def clock_for(timer: str, device: torch.device | str) -> Clock:
    """The clock for a case's `timer` ("device" or "wall") on `device`."""
    if timer == "device":
        return DeviceClock(device)
    if timer == "wall":
        return WallClock(device)
    raise ValueError(f"unknown timer kind {timer!r}; expected 'device' or 'wall'")
