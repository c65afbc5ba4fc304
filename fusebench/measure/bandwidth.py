"""The machine's peak memory bandwidth, measured once with a large device-to-device copy and cached.

Peak = (bytes read + bytes written) / median time of `dst.copy_(src)` for a buffer much larger
than any cache (1 GiB on CUDA, 256 MiB on CPU). Effective bandwidths are reported as a fraction
of it. The value is cached per host and device in `<cache dir>/peak_bandwidth.json` (cache dir:
$FUSEBENCH_CACHE_DIR, else $XDG_CACHE_HOME/fusebench, else ~/.cache/fusebench).
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

import torch

from fusebench.files import atomic_write_json, read_json
from fusebench.measure.machine import cpu_model
from fusebench.measure.stats import summarize
from fusebench.measure.timing import DeviceTimer

CACHE_FILE = "peak_bandwidth.json"
_COPY_BYTES = {"cuda": 1 << 30, "cpu": 256 << 20}


def cache_dir() -> Path:
    """Where fusebench keeps per-machine measurements."""
    if os.environ.get("FUSEBENCH_CACHE_DIR"):
        return Path(os.environ["FUSEBENCH_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "fusebench"


def device_key(device: torch.device) -> str:
    """Identifies the memory measured: host name plus GPU name or CPU model."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
    else:
        name = f"{cpu_model()} x{os.cpu_count()} threads={torch.get_num_threads()}"
    return f"{platform.node()}|{device.type}|{name}"


def measure_copy_bandwidth(device: torch.device, nbytes: int | None = None, repeats: int = 10) -> float:
    """GB/s (1e9 bytes/s) of a `nbytes` device-to-device copy, counting bytes read plus written."""
    nbytes = nbytes or _COPY_BYTES.get(device.type, _COPY_BYTES["cpu"])
    source = torch.ones(nbytes, dtype=torch.uint8, device=device)
    destination = torch.empty_like(source)
    timer = DeviceTimer(device)
    for _ in range(2):
        destination.copy_(source)
    times = [timer.time(lambda: destination.copy_(source)) for _ in range(repeats)]
    return 2 * nbytes / summarize(times).median / 1e9


def peak_bandwidth_gbs(device: torch.device, *, remeasure: bool = False) -> float:
    """The cached peak bandwidth of `device` on this machine, measured now if not cached yet."""
    path = cache_dir() / CACHE_FILE
    key = device_key(device)
    cached: dict[str, float] = {}
    if path.exists():
        try:
            cached = dict(read_json(path))
        except (OSError, ValueError, TypeError):
            cached = {}  # NOTE: an unreadable cache is re-measured and rewritten, never fatal
    if key in cached and not remeasure:
        return float(cached[key])
    cached[key] = measure_copy_bandwidth(device)
    atomic_write_json(path, cached, indent=2)
    return cached[key]
