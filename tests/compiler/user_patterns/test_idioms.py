"""Idioms from model code (attention masks, head reshapes, integer-typed masks, detach/clone
chains, in-place shape ops, more cast spellings), jitted against eager: tests/support/user_patterns.py."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests.support.user_patterns import Arg, Pattern, check_pattern, fused_options

X = Arg(("B", "D"))
Y = Arg(("B", "D"))
X3 = Arg(("B", "N", "D"))
OUT = Arg(("B", "D"), written=True)
EVEN = ({"B": 3, "N": 5, "D": 6}, {"B": 1, "N": 1, "D": 2}, {"B": 2, "N": 7, "D": 4})
F32 = (torch.float32,)


def int_mask_equals_zero_fill(scores, mask):
    return scores.masked_fill(mask == 0, -1e9).softmax(-1)


def int_mask_times_float(x, mask):
    return x * mask.unsqueeze(-1), (x * mask[..., None].to(x.dtype)).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)


def heads_view_permute_contiguous_view(x):
    b, n, d = x.shape
    h = x.view(b, n, 2, d // 2).permute(0, 2, 1, 3).contiguous().view(b * 2, n, d // 2)
    return h.transpose(1, 2).reshape(b, 2, d // 2, n).sum(1)


def more_cast_spellings(x):
    return x.byte(), x.char(), x.short(), x.to(torch.uint8), x.cpu() * 2, x.to(x.device, x.dtype)


def bool_mask_logic(x, y):
    m = x > 0
    return (~m).float(), m.logical_not().sum(), (m & (y > 0)).any(-1), m.float().mean(), m.sum(), m.all()


def where_mixed_dtypes(x, y):
    return torch.where(x > 0, x, y.float()), torch.where(x > 0, x.half(), 0), torch.where(y > 0, 1, 0)


def detach_clone_chains(x):
    a = x.detach().clone() * 2
    b = x.clone().detach() + x
    c = x.detach() * x
    return a, b, c


def tril_in_place_and_masks(x):
    m = torch.ones(x.shape[-1], x.shape[-1], dtype=x.dtype).tril_()
    return x @ m, torch.ones_like(m).triu_(1).sum()


def index_put_accumulate(out, idx, v):
    out.index_put_((idx,), v, accumulate=True)
    return out


def scatter_reduce_kwarg(x, idx):
    out = torch.zeros_like(x)
    return out.scatter(1, idx, x[:, : idx.shape[1]], reduce="add"), x.scatter_reduce(1, idx, x, "amax")


def topk_smallest_and_sort_stable(x):
    values, indices = x.topk(2, dim=-1, largest=False)
    return values, indices, x.argsort(dim=-1, stable=True), x.sort(dim=0, stable=True, descending=True).indices


def median_kth_mode(x):
    return x.median(-1).values, x.kthvalue(1, -1).values, x.median()


def expand_minus_one(x, w):
    return w[None].expand(x.shape[0], -1) * x, w.expand(1, -1).expand(x.shape[0], w.shape[0]) + x


def split_into_ones(x):
    return [p.squeeze(0) * i for i, p in enumerate(x.split(1, dim=0))]


def no_grad_block_inside(x):
    with torch.no_grad():
        scale = x.abs().amax(-1, keepdim=True)
    return x / (scale + 1)


def dtype_flags(x):
    y = x * 2
    return y, x.is_floating_point(), x.dtype == torch.float32, x.dtype in (torch.float16, torch.bfloat16)


def finfo_iinfo(x):
    return x.clamp(min=torch.finfo(x.dtype).min / 2), torch.iinfo(torch.int32).max + x.long().sum()


def cast_inside_loss_chain(logits, target):
    logp = logits.float().log_softmax(-1)
    nll = -logp.gather(-1, target[..., None]).squeeze(-1)
    return nll.mean().to(logits.dtype), nll.detach().max()


def bf16_masked_fill_neg_inf(x, m):
    return x.masked_fill(~m, float("-inf")).float().softmax(-1).to(x.dtype)


def padding_and_slicing(x):
    return F.pad(x, (1, 2))[..., 1:-2] + x, F.pad(x, (0, 0, 1, 0), value=-1.0)[:-1]


def clamp_with_tensor_bounds(x, low):
    return torch.clamp(x, min=low), x.clamp(low, low + 1)


def chained_views_then_inplace(x):
    h = x.clone()
    h.view(-1)[:2].fill_(0)
    h.transpose(0, 1).reshape(-1)[0] = 1.0
    return h


IDIOM_PATTERNS = [
    Pattern(int_mask_equals_zero_fill, (X, Arg(("B", "D"), kind="long:2"))),
    Pattern(int_mask_times_float, (X3, Arg(("B", "N"), kind="long:2"))),
    Pattern(heads_view_permute_contiguous_view, (X3,), sizes=EVEN),
    Pattern(more_cast_spellings, (Arg(("B", "D"), kind="pos"),), grad=False),
    Pattern(bool_mask_logic, (X, Y)),
    Pattern(where_mixed_dtypes, (X, Y)),
    Pattern(detach_clone_chains, (X,)),
    Pattern(tril_in_place_and_masks, (X,)),
    Pattern(index_put_accumulate, (OUT, Arg(("K",), kind="long:B"), Arg(("K", "D"), grad=False))),
    Pattern(scatter_reduce_kwarg, (X, Arg(("B", "K"), kind="long:D")), dtypes=F32),
    Pattern(topk_smallest_and_sort_stable, (X,), dtypes=F32),
    Pattern(median_kth_mode, (X,), dtypes=F32),
    Pattern(expand_minus_one, (X, Arg(("D",)))),
    Pattern(split_into_ones, (X,)),
    Pattern(no_grad_block_inside, (X,)),
    Pattern(dtype_flags, (X,)),
    Pattern(finfo_iinfo, (X,)),
    Pattern(cast_inside_loss_chain, (X3, Arg(("B", "N"), kind="long:D"))),
    Pattern(bf16_masked_fill_neg_inf, (X, Arg(("B", "D"), kind="mask"))),
    Pattern(padding_and_slicing, (X,)),
    Pattern(clamp_with_tensor_bounds, (X, Arg(("D",)))),
    Pattern(chained_views_then_inplace, (X,)),
]


@pytest.mark.parametrize("pattern", IDIOM_PATTERNS, ids=lambda p: p.name)
def test_idiom_matches_eager(pattern: Pattern) -> None:
    check_pattern(pattern)


@pytest.mark.parametrize("pattern", IDIOM_PATTERNS[::5], ids=lambda p: p.name)
def test_idiom_matches_eager_through_the_fusion_pass(pattern: Pattern) -> None:
    check_pattern(pattern, **fused_options())
