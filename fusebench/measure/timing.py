"""Timers and cache flushing: how one sample is timed on each device.

A timer's `time(run)` calls `run()` once and returns the seconds it took:
- `DeviceTimer` on CUDA records CUDA events around the call and waits for the end event, so the
  time is the device's, not the host's launch time; on CPU it is perf_counter around the call.
- `WallTimer` is perf_counter with the device synchronized before and after: what a user waits
  for, host overhead and compilation included.
`L2Flusher` overwrites a buffer larger than the GPU's L2 cache between samples, so every sample
reads its inputs from device memory as a cold call would (a no-op on CPU).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

import torch

# NOTE: at least 256 MiB, as Triton's do_bench: larger than any current L2 (H200: 60 MiB).
_MIN_FLUSH_BYTES = 256 * 1024 * 1024


class Timer(Protocol):
    """Times one call of `run`, in seconds."""

    def time(self, run: Callable[[], Any]) -> float: ...


def synchronize(device: torch.device) -> None:
    """Waits for all work queued on `device` (a no-op on CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class WallTimer:
    """Host wall time of one call, the device synchronized on both sides."""

    def __init__(self, device: torch.device, clock: Callable[[], float] = time.perf_counter) -> None:
        self.device = device
        self.clock = clock

    def time(self, run: Callable[[], Any]) -> float:
        synchronize(self.device)
        start = self.clock()
        run()
        synchronize(self.device)
        return self.clock() - start


class DeviceTimer:
    """Device time of one call: CUDA events on GPU, perf_counter on CPU (where host time is device time)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._wall = WallTimer(device)
        if device.type == "cuda":
            self._start = torch.cuda.Event(enable_timing=True)
            self._end = torch.cuda.Event(enable_timing=True)

    def time(self, run: Callable[[], Any]) -> float:
        if self.device.type != "cuda":
            return self._wall.time(run)
        self._start.record()
        run()
        self._end.record()
        self._end.synchronize()
        return self._start.elapsed_time(self._end) / 1e3


def make_timer(kind: str, device: torch.device) -> Timer:
    """The timer a case asked for ("device" or "wall") on `device`."""
    if kind == "wall":
        return WallTimer(device)
    if kind == "device":
        return DeviceTimer(device)
    raise ValueError(f"unknown timer kind {kind!r}; expected 'device' or 'wall'")


class L2Flusher:
    """Evicts the GPU's L2 cache by overwriting a buffer larger than it; does nothing on CPU."""

    def __init__(self, device: torch.device) -> None:
        self.buffer: torch.Tensor | None = None
        if device.type == "cuda":
            l2_bytes = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)
            size = max(4 * l2_bytes, _MIN_FLUSH_BYTES)
            self.buffer = torch.empty(size, dtype=torch.int8, device=device)

    def flush(self) -> None:
        """Overwrites the buffer (queued on the current stream, before the next timed call)."""
        if self.buffer is not None:
            self.buffer.zero_()
