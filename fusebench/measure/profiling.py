"""Counting the device kernels one call launches, with torch.profiler (CUDA only).

Every device activity the profiler records during the call counts: kernels, and the memcpy /
memset operations a program launches (a copy is work the device does too). On CPU there are no
kernels to count and the result is None (printed "n/a").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def count_kernels(run: Callable[[], Any], device: torch.device) -> int | None:
    """Device operations launched by one `run()` on CUDA; None on other devices."""
    if device.type != "cuda":
        return None
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize(device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize(device)
    return sum(1 for event in prof.events() if event.device_type == DeviceType.CUDA)
