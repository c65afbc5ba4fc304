"""A mask as the additive bias torch's fused attention kernels take, made once per mask.

Efficient attention and cuDNN take a mask as an additive bias whose rows are aligned to 16
elements; FlashAttention on the CPU takes it additive too. A boolean mask (True: attend) becomes
0 / -inf in the query's dtype (traced attention does this in the trace already: ops/nn.py), and a
mask whose rows are misaligned (a key length that is not a multiple of 16, as a decode step's) is
copied into aligned rows: two kernels. A model passes one mask to every layer's attention, forward
and backward, so `additive_bias` remembers what it made for the last few masks and hands it out
again while the mask is the very same tensor, unchanged (same object, version counter, address,
strides and dtype): once per mask instead of once per layer and direction. An entry goes when its
mask is freed, so a remembered bias never outlives the step that made its mask.
"""

from __future__ import annotations

import threading
from typing import Any

import torch
from torch.utils.weak import WeakTensorKeyDictionary

ALIGNMENT = 16  # efficient attention's and cuDNN's bias rows start at multiples of this many elements
_REMEMBERED = 4  # masks remembered at once (a decoder's own and an encoder's: a few per step)


def _additive(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    if mask.dtype != torch.bool:
        return mask
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(mask.logical_not(), float("-inf"))


def _aligned(bias: torch.Tensor) -> torch.Tensor:
    columns = bias.shape[-1]
    if bias.stride(-1) == 1 and all(s % ALIGNMENT == 0 for s in bias.stride()[:-1]):
        return bias
    padded = bias.new_zeros((*bias.shape[:-1], columns + (-columns % ALIGNMENT)))
    padded[..., :columns] = bias
    return padded[..., :columns]


_made = WeakTensorKeyDictionary()  # mask -> (what the mask was then, the bias made for it)
_lock = threading.Lock()  # a backward runs on autograd's thread while another forward may run


def _key(mask: torch.Tensor, dtype: torch.dtype, aligned: bool) -> tuple:
    return (mask._version, mask.data_ptr(), mask.dtype, tuple(mask.stride()), dtype, aligned)


def additive_bias(mask: Any, dtype: torch.dtype, *, aligned: bool) -> Any:
    """`mask` (None, boolean or floating) as an additive bias in `dtype` for a boolean mask, with
    rows aligned to `ALIGNMENT` elements when `aligned`; the one made before for this very mask
    when it has not changed since."""
    if mask is None or (mask.dtype != torch.bool and not aligned):
        return mask
    key = _key(mask, dtype, aligned)
    with _lock:
        made = _made.get(mask)
    if made is not None and made[0] == key:
        return made[1]
    bias = _additive(mask, dtype)
    bias = _aligned(bias) if aligned else bias
    if bias is mask:
        return bias
    with _lock:
        while mask not in _made and len(_made) >= _REMEMBERED:
            del _made[next(iter(_made))]
        _made[mask] = (key, bias)
    return bias


def remembered() -> int:
    """How many masks have a bias remembered now (for tests)."""
    with _lock:
        return len(_made)
