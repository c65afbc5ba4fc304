"""Code users write around tensors in Python: shape reads (`len`, `dim()`, `math.sqrt(x.size(-1))`,
`max(x.shape)`), Python `sum` over tensors, iteration over rows, tensor-valued bounds and fill
values, `dim=` tuples and lists, method spellings with keyword arguments, jitted against eager:
tests/support/user_patterns.py."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from tests.support.user_patterns import Arg, Pattern, check_pattern, fused_options

X = Arg(("B", "D"))
Y = Arg(("B", "D"))
X3 = Arg(("B", "N", "D"))
W = Arg(("D",))
F32 = (torch.float32,)


def shape_reads_in_python(x3):
    scale = 1 / math.sqrt(x3.size(-1))
    rows = len(x3) * x3.dim() + x3.ndimension() + x3.nelement() // max(x3.numel(), 1)
    return x3 * scale * rows, tuple(x3.shape), x3.size(), max(x3.shape), min(x3.shape[1:])


def python_sum_of_tensors(x3):
    return sum(x3.unbind(1)), sum([x3[:, 0], x3[:, -1]], torch.zeros_like(x3[:, 0]))


def iterate_rows(x):
    return torch.stack([row * i for i, row in enumerate(x)]) if len(x) else x * 0


def tensor_valued_bounds_and_fills(x, w):
    zero = torch.tensor(0.0, dtype=x.dtype)
    return (
        x.clamp(min=zero),
        x.masked_fill(x > 0, torch.tensor(-1.0)),
        torch.where(x > 0, x, zero),
        x.clamp(w.min(), w.max()),
    )


def reduction_dim_tuples_and_lists(x3):
    return (
        x3.sum(dim=(-1, -2)),
        x3.mean(dim=[1, 2], keepdim=True),
        x3.amax(dim=(0, 1)),
        x3.float().var(dim=(0, -1), unbiased=False),
        torch.std(x3, dim=1, correction=0),
    )


def max_min_spellings(x, y):
    return x.max(dim=-1)[0], torch.max(x, y), x.min(-1, keepdim=True).values, x.argmax(-1, keepdim=True), x.max()


def std_var_mean_variants(x):
    std, mean = torch.std_mean(x, dim=-1)
    var, mean2 = torch.var_mean(x.float(), -1, keepdim=True, correction=0)
    return std, mean, var, mean2, x.std(-1, unbiased=False), torch.var(x, dim=0, correction=1)


def softmax_keyword_spellings(x3):
    return (
        x3.softmax(dim=-1, dtype=torch.float32),
        F.softmax(x3, -1),
        torch.log_softmax(x3, dim=1),
        F.log_softmax(x3, dim=-1, dtype=torch.float32),
        x3.float().log_softmax(-1).exp(),
    )


def to_with_keywords(x):
    return (
        x.to(memory_format=torch.contiguous_format) * 2,
        x.to(x.device, non_blocking=True) + 1,
        x.to("cpu" if x.device.type == "cpu" else x.device, dtype=torch.float32),
        x.to(device=x.device, dtype=x.dtype, copy=True),
        x.detach().float(),
    )


def nan_to_num_and_finite(x):
    y = x / (x - x.round())
    return torch.nan_to_num(y, nan=0.0, posinf=1e4, neginf=-1e4), y.isfinite().all(), torch.where(y.isinf(), 0, y)


def addmm_baddbmm(x, y, w):
    weight = y.t() @ y
    return (
        torch.addmm(w, x, weight),
        torch.addmm(w, x, weight, beta=0.5, alpha=2),
        torch.baddbmm(x[:, None, :1], x[:, :, None], x[:, None, :], beta=0.5, alpha=2.0),
    )


def einsum_with_weight_matrices(x3, w):
    weight = w[:, None] * w[None, :]
    return torch.einsum("bnd,de->bne", x3, weight), torch.einsum("ij->ji", weight), torch.einsum("bnd->bd", x3)


def expand_reshape_repeat(x):
    b, d = x.shape
    return x.unsqueeze(1).expand(-1, 3, -1).reshape(-1, d), x[:, None, :].repeat(1, 2, 1).view(b * 2, d)


def interleaved_rotary(x3):
    x1, x2 = x3[..., ::2], x3[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2) + x3


def chunk_not_divisible_and_split_with_sizes(x):
    pieces = torch.chunk(x, 4, -1)
    a, b = x.split_with_sizes([1, x.shape[-1] - 1], dim=-1)
    return [p.sum(-1) for p in pieces], a * b[:, :1]


def embedding_padding_idx(ids, weight):
    return F.embedding(ids, weight, padding_idx=0), F.embedding(ids, weight).sum(1)


def arange_device_masks(x3, lengths):
    n = x3.shape[1]
    keep = torch.arange(n, device=x3.device)[None, :] < lengths[:, None]
    causal = torch.tril(torch.ones(n, n, device=x3.device, dtype=torch.bool))
    scores = x3 @ x3.transpose(1, 2)
    scores = scores.masked_fill(~(causal[None] & keep[:, None, :]), float("-inf"))
    return scores.softmax(-1).nan_to_num(), keep.sum(-1)


def scatter_value_keyword_and_arange_src(x, idx):
    hot = torch.zeros_like(x).scatter_(-1, idx, value=1.0)
    order = torch.full((x.shape[-1],), -1, dtype=torch.long).scatter(0, idx[0], torch.arange(idx.shape[1]))
    return hot, order, x.topk(2).indices.sort(-1).values


def is_tensor_checks(x, w):
    scale = w if torch.is_tensor(w) else torch.tensor(w)
    return x * scale if isinstance(scale, torch.Tensor) else x, torch.is_floating_point(x)


def mean_over_numel_and_dtype_kwarg(x):
    return x.sum() / x.numel(), x.mean(dtype=torch.float64), x.abs().sum(-1) / x.shape[-1]


def logical_mask_algebra(x, y):
    both = torch.logical_and(x > 0, y > 0)
    return both.float(), torch.logical_xor(x > 0, y > 0).sum(), (both | (x < -1)).to(x.dtype) * x


def clip_and_half_casts(x):
    return x.clip(min=-0.5), x.clamp(-1e4, 1e4).to(torch.float16), torch.clamp(x, min=0).sqrt()


def nibbles_unpacked_and_packed(q):
    shifts = torch.arange(0, 16, 4, device=q.device)
    nibbles = (q[..., None] >> shifts) & 0xF
    return nibbles, (nibbles[..., 1] << 4) | nibbles[..., 0], torch.bitwise_left_shift(q, 2) >> 1


def less_common_spellings(x3, w):
    lo, hi = x3.aminmax(dim=-1)
    a, b = torch.broadcast_tensors(x3, w)
    return (
        torch.linalg.norm(x3, dim=-1),
        torch.linalg.norm(x3.float(), dim=(1, 2)),
        (hi - lo) * x3.swapdims(0, 1).sum(0).mean(),
        torch.nanmean(torch.where(x3 > 1, float("nan"), x3), -1),
        a * b,
        x3.clone().square_(),
    )


PYTHON_SIDE_PATTERNS = [
    Pattern(shape_reads_in_python, (X3,)),
    Pattern(python_sum_of_tensors, (X3,)),
    Pattern(iterate_rows, (X,)),
    Pattern(tensor_valued_bounds_and_fills, (X, W)),
    Pattern(reduction_dim_tuples_and_lists, (X3,)),
    Pattern(max_min_spellings, (X, Y), dtypes=F32),
    Pattern(std_var_mean_variants, (X,)),
    Pattern(softmax_keyword_spellings, (X3,)),
    Pattern(to_with_keywords, (X,)),
    Pattern(nan_to_num_and_finite, (X,), grad=False),
    Pattern(addmm_baddbmm, (X, Y, Arg(("D",))), dtypes=F32),
    Pattern(einsum_with_weight_matrices, (X3, W)),
    Pattern(expand_reshape_repeat, (X,)),
    Pattern(interleaved_rotary, (X3,), sizes=({"B": 3, "N": 5, "D": 6}, {"B": 1, "N": 1, "D": 2})),
    Pattern(chunk_not_divisible_and_split_with_sizes, (X,)),
    Pattern(embedding_padding_idx, (Arg(("B", "K"), kind="long:D"), Arg(("D", "N")))),
    Pattern(arange_device_masks, (X3, Arg(("B",), kind="long:N"))),
    Pattern(scatter_value_keyword_and_arange_src, (X, Arg(("B", "K"), kind="long:D")), dtypes=F32),
    Pattern(is_tensor_checks, (X, W)),
    Pattern(mean_over_numel_and_dtype_kwarg, (X,)),
    Pattern(logical_mask_algebra, (X, Y)),
    Pattern(clip_and_half_casts, (X,)),
    Pattern(less_common_spellings, (X3, W), dtypes=F32),
    Pattern(nibbles_unpacked_and_packed, (Arg(("B", "D"), kind="long:65536"),), dtypes=F32),
]


@pytest.mark.parametrize("pattern", PYTHON_SIDE_PATTERNS, ids=lambda p: p.name)
def test_python_side_pattern_matches_eager(pattern: Pattern) -> None:
    check_pattern(pattern)


@pytest.mark.parametrize("pattern", PYTHON_SIDE_PATTERNS[::3], ids=lambda p: p.name)
def test_python_side_pattern_matches_eager_through_the_fusion_pass(pattern: Pattern) -> None:
    check_pattern(pattern, **fused_options())
