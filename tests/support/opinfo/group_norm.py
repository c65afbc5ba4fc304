"""Op cases: group_norm (F.group_norm, torch.group_norm) over 2-D to 5-D inputs, one group and one
group per channel, size-1 dims, an empty batch, non-contiguous inputs, with and without weight and
bias. nn.GroupNorm (and the gradients) are in test_group_norm.py."""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F

from tests.support.opinfo.samples import FLOATS, Maker, OpCase, Sample


def _group_norm_samples(make: Maker) -> Iterator[Sample]:
    yield Sample((make(2, 6, 3), 2), {"weight": make(6), "bias": make(6)})
    yield Sample((make(3, 6), 3), {"weight": make(6)})  # 2-D
    yield Sample((make(2, 4, 5, 5), 4), {"bias": make(4)})  # a group per channel
    yield Sample((make(2, 6, 2, 3, 2), 1, make(6), make(6), 1e-3))  # 5-D, one group, eps
    yield Sample((make(1, 4, 1, 1), 2, make(4), make(4)))  # size-1 dims
    yield Sample((make(2, 1, 7), 1))  # one channel
    yield Sample((make(3, 6, 8, noncontiguous=True), 3), {"weight": make(6, noncontiguous=True), "bias": make(6)})
    yield Sample((make(2, 4, 3, 5, transposed=True), 2, make(4), make(4)))
    yield Sample((make(0, 4, 3), 2, make(4), make(4)))  # an empty batch
    yield Sample((make(4, 8, 16) * 30 + 100, 4, None, None, 1e-6))  # a large mean


TOLERANCES = {torch.float32: (1e-4, 1e-5), torch.bfloat16: (2e-2, 3e-2)}
CASES = [OpCase("group_norm", (F.group_norm, torch.group_norm), _group_norm_samples, FLOATS, TOLERANCES)]
