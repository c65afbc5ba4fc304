"""Gathering a call's arguments in C, for the per-call hot paths (nvFuser layouts, CUDA-graph keys).

`picker(positions)` returns `args -> tuple(args[i] for i in positions)` built on
`operator.itemgetter`; `data_ptr` and `stride` are the unbound Tensor methods those paths `map`
over the gathered tensors, so no Python frame runs per tensor.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import torch

data_ptr, stride = torch.Tensor.data_ptr, torch.Tensor.stride


def picker(positions: Sequence[int]) -> Callable[[Sequence[Any]], tuple]:
    """`args -> (args[i] for i in positions)` as a tuple, gathered in C (`operator.itemgetter`)."""
    if len(positions) == 1:
        only = positions[0]
        return lambda args: (args[only],)
    return operator.itemgetter(*positions) if positions else lambda args: ()
