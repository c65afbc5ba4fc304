"""Memory of real tensors: the byte ranges they can touch, and whether two of them may overlap."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def overlapping(tensors: Sequence[torch.Tensor]) -> bool:
    """Whether any two of these (non-empty) tensors may touch the same bytes; conservative: byte
    ranges are compared, so interleaved views count as overlapping."""
    spans = sorted(byte_span(t) for t in tensors)
    return any(spans[k][1] > spans[k + 1][0] for k in range(len(spans) - 1))


def byte_span(t: torch.Tensor) -> tuple[int, int]:
    """(first byte, one past the last byte) of the memory a non-empty tensor `t` can touch."""
    extent = 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))
    return t.data_ptr(), t.data_ptr() + extent * t.element_size()
