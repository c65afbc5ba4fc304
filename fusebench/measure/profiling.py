"""Counting the device kernels one call launches, with torch.profiler (CUDA only).

Every device activity the profiler records during the call counts: kernels, and the memcpy /
memset operations a program launches (a copy is work the device does too). On CPU there are no
kernels to count and the result is None (printed "n/a").

The profiler tears CUPTI down when it stops (`TEARDOWN_CUPTI=1`, unless the environment says
otherwise). Kineto's default leaves CUPTI subscribed after the profiler exits, and then every
later kernel launch of the process costs more host time. A worker measures many units in one process
(timing first, counting after), so every unit after the first would be timed with that tax.

The setting is made when this module is imported, before any profiler of the process: kineto
reads it once, and a count after a profiler session that ran without it finds no kernels at all
(a test's own torch.profiler session earlier in the process would leave every later count at 0).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch

os.environ.setdefault("TEARDOWN_CUPTI", "1")


def count_kernels(run: Callable[[], Any], device: torch.device) -> int | None:
    """Device operations launched by one `run()` on CUDA; None on other devices."""
    if device.type != "cuda":
        return None
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    count = 0
    # NOTE: CUPTI, set up again after its teardown (TEARDOWN_CUPTI, so that CUDA graphs can be
    # captured between profiles), now and then delivers no record of a run's kernels at all: a run
    # that counted none is counted once more
    for _ in range(2):
        torch.cuda.synchronize(device)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            run()
            torch.cuda.synchronize(device)
        count = sum(1 for event in prof.events() if event.device_type == DeviceType.CUDA)
        if count:
            break
    return count
