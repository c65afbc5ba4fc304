"""How many threads torch's CPU kernels use while measuring: one by default, as torch.utils.benchmark.

On a shared machine an operator split over every core waits for the slowest of them: with another
busy process beside it, a tiny op's time jumps onto plateaus of milliseconds. One thread per
measurement process makes CPU timings comparable between runs and machines (`--threads N` asks
for more, to measure a parallel kernel on purpose). The count is an environment variable's,
OMP_NUM_THREADS, when set: `fusebench compare` passes it that way, so that a side checked out
from a revision older than `--threads` measures with the same count.
"""

from __future__ import annotations

import argparse
import os

from fusebench.errors import check

DEFAULT_THREADS = 1
MAX_THREADS = 1024
THREADS_ENV = "OMP_NUM_THREADS"


def add_threads_argument(parser: argparse.ArgumentParser) -> None:
    """Adds `--threads N` (default: $OMP_NUM_THREADS if set, else 1)."""
    parser.add_argument(
        "--threads",
        type=int,
        metavar="N",
        help=f"torch's CPU threads while measuring (default: ${THREADS_ENV} if set, else {DEFAULT_THREADS})",
    )


def checked_threads(threads: int | None) -> int:
    """The thread count to measure with: `threads` (checked) or the default."""
    if threads is None:
        from_env = os.environ.get(THREADS_ENV, "")
        return int(from_env) if from_env.isdigit() and int(from_env) >= 1 else DEFAULT_THREADS
    check(
        1 <= threads <= MAX_THREADS,
        lambda: f"--threads {threads}: expected a whole number of threads from 1 to {MAX_THREADS}",
    )
    return threads
