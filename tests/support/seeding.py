"""Seeding torch's generators in tests that seed before every call.

`torch.manual_seed` also queues a seed for every accelerator whose runtime is not initialized yet,
and each queued call formats the caller's stack for a later error message: 1 to 4 ms under
pytest's deep stacks, most of an op test's time when it seeds before every compiled and eager
call. `manual_seed` seeds the CPU generator, and CUDA's where CUDA is in use (a test that draws on
the GPU has initialized it by making its inputs there). Python's `random` is seeded too: op_db's
samples draw some arguments from it (a margin, a dimension)."""

from __future__ import annotations

import random

import torch


def manual_seed(seed: int) -> None:
    """Seeds Python's `random`, torch's CPU generator, and every CUDA device's when CUDA is initialized."""
    random.seed(seed)
    torch.random.default_generator.manual_seed(seed)
    if torch.cuda.is_initialized():
        torch.cuda.manual_seed_all(seed)
