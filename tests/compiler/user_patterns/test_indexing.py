"""Indexing the way users write it (slices with steps and negatives, integer-tensor and boolean
indices, where/masked_fill, index_select, gather, scatter_add, take_along_dim, arange- and
tril-built masks), jitted against eager: tests/support/user_patterns.py."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests.support.user_patterns import Arg, Pattern, check_pattern, fused_options

X = Arg(("B", "D"))
X3 = Arg(("B", "N", "D"))
IDX_B = Arg(("K",), kind="long:B")
# NOTE: ties order differently in low precision; orderings are checked in float32 only.
F32 = (torch.float32,)
IDX_D = Arg(("B", "K"), kind="long:D")


def step_and_negative_slices(x):
    return x[::2], x[:, -3:-1], x[-1:, 1::3], x[..., :-1] - x[..., 1:]


def integer_tensor_rows(x, idx):
    return x[idx] * 2, x[idx, 0], x[:, 0][idx]


def integer_tensor_last_dim(x, idx):
    return x[..., idx].sum(-1), x[:, idx]


def list_index(x):
    return x[[0, -1]], x[:, [1, 0, 1]]


def index_select_both(x, idx):
    return x.index_select(0, idx), torch.index_select(x, 1, idx % x.shape[1])


def gather_last_dim(x, idx):
    return x.gather(-1, idx), torch.gather(x, 1, idx).sum()


def gather_by_expanded_column(x3, rows):
    picked = x3.gather(1, rows.view(1, -1, 1).expand(x3.shape[0], -1, x3.shape[2]))
    return picked, x3.sum(0).gather(0, rows[:, None].expand(-1, x3.shape[2])) * 2


def gather_log_probs(logits, target):
    return logits.log_softmax(-1).gather(-1, target.unsqueeze(-1)).squeeze(-1).neg().mean()


def take_along_dim_topk(x):
    order = x.argsort(-1, descending=True)
    return torch.take_along_dim(x, order, dim=-1), x.take_along_dim(order[..., :1], -1)


def scatter_add_counts(x, idx):
    out = torch.zeros(x.shape[0], x.shape[1], dtype=x.dtype)
    return out.scatter_add(1, idx, x[:, : idx.shape[1]])


def scatter_values(x, idx):
    return x.scatter(1, idx, 0.0), torch.scatter(x, 1, idx, x[:, : idx.shape[1]] * 2)


def one_hot_via_scatter(target, x):
    hot = torch.zeros_like(x).scatter_(1, target[:, None], 1.0)
    return (hot * x).sum(-1), F.one_hot(target, x.shape[-1]).to(x.dtype) * x


def where_scalars(x):
    return torch.where(x > 0, x, 0.0), torch.where(x > 0, 1.0, -1.0), torch.where(x < 0, x, torch.zeros_like(x))


def where_neg_inf_softmax(x, m):
    return torch.where(m, x, float("-inf")).softmax(-1).nan_to_num(0.0)


def masked_fill_neg_inf(x, m):
    return x.masked_fill(~m, float("-inf")).softmax(-1).nan_to_num(), x.masked_fill(m, 0)


def masked_fill_dtype_min(x, m):
    return x.masked_fill(~m, torch.finfo(x.dtype).min).softmax(-1)


def boolean_mask_where_sum(x, m):
    return torch.where(m, x, torch.zeros((), dtype=x.dtype)).sum(-1), (x * m).sum(0)


def arange_length_mask(x, lengths):
    mask = torch.arange(x.shape[1])[None, :] < lengths[:, None]
    return x.masked_fill(~mask[..., None], 0.0), mask.sum(-1)


def arange_causal_mask(x):
    n = x.shape[-2]
    rows, cols = torch.arange(n)[:, None], torch.arange(n)[None, :]
    scores = x @ x.transpose(-1, -2)
    return scores.masked_fill(cols > rows, float("-inf")).softmax(-1)


def tril_triu_masks(x):
    n = x.shape[-1]
    ones = torch.ones(n, n, dtype=torch.bool)
    scores = x[:, :, None] * x[:, None, :]
    return scores.masked_fill(~ones.tril(), 0), torch.triu(scores, diagonal=1), scores.tril(-1).sum()


def tril_of_full(x):
    mask = torch.full((x.shape[-1], x.shape[-1]), float("-inf")).triu(1)
    return (x[:, None, :] + mask).softmax(-1)


def argmax_amax_topk(x):
    values, indices = x.topk(2, dim=-1)
    return x.argmax(-1), x.amax(-1), x.amin(0), values, indices, x.max(-1).indices


def sort_and_gather(x):
    values, order = x.sort(-1)
    return values, order, x.gather(-1, order), torch.sort(x, 0, descending=True).values


def max_with_dim(x):
    m, i = torch.max(x, dim=-1, keepdim=True)
    return m * 2, i, torch.min(x, 0)[0], x.max(), x.argmin()


def clamp_index_then_gather(x, idx):
    safe = idx.clamp(max=x.shape[-1] - 1)
    return x.gather(-1, safe)


def nonzero_counts(x):
    return (x > 0).sum(-1), (x > 0).any(-1), (x > 0).all(0), torch.count_nonzero(x > 0, dim=-1)


def embedding_lookup(weight, ids):
    return F.embedding(ids, weight) * 2, weight[ids].sum(0)


def last_token_select(x, lengths):
    idx = (lengths - 1).clamp(min=0)
    return x[torch.arange(x.shape[0]), idx]


def index_with_tensor_pair(x, rows, cols):
    return x[rows, cols], x[rows[:, None], cols[None, :]]


INDEXING_PATTERNS = [
    Pattern(step_and_negative_slices, (X,)),
    Pattern(integer_tensor_rows, (X, IDX_B)),
    Pattern(integer_tensor_last_dim, (X, Arg(("K",), kind="long:D"))),
    Pattern(list_index, (X,), sizes=({"B": 3, "D": 4}, {"B": 1, "D": 2})),
    Pattern(index_select_both, (X, IDX_B)),
    Pattern(gather_last_dim, (X, IDX_D)),
    Pattern(gather_log_probs, (X3, Arg(("B", "N"), kind="long:D"))),
    Pattern(take_along_dim_topk, (X,), dtypes=F32),
    Pattern(scatter_add_counts, (X, IDX_D)),
    Pattern(scatter_values, (X, IDX_D)),
    Pattern(one_hot_via_scatter, (Arg(("B",), kind="long:D"), X)),
    Pattern(where_scalars, (X,)),
    Pattern(where_neg_inf_softmax, (X, Arg(("B", "D"), kind="mask"))),
    Pattern(masked_fill_neg_inf, (X, Arg(("B", "D"), kind="mask"))),
    Pattern(masked_fill_dtype_min, (X, Arg(("B", "D"), kind="mask"))),
    Pattern(boolean_mask_where_sum, (X, Arg(("B", "D"), kind="bool"))),
    Pattern(arange_length_mask, (X3, Arg(("B",), kind="long:N"))),
    Pattern(arange_causal_mask, (X3,)),
    Pattern(tril_triu_masks, (X,)),
    Pattern(tril_of_full, (X,)),
    Pattern(argmax_amax_topk, (X,), sizes=({"B": 3, "D": 6}, {"B": 1, "D": 2}, {"B": 2, "D": 5}), dtypes=F32),
    Pattern(sort_and_gather, (X,), dtypes=F32),
    Pattern(max_with_dim, (X,), dtypes=F32),
    Pattern(clamp_index_then_gather, (X, Arg(("B", "K"), kind="long:9"))),
    Pattern(nonzero_counts, (X,)),
    Pattern(embedding_lookup, (Arg(("D", "N")), Arg(("B", "K"), kind="long:D"))),
    Pattern(last_token_select, (X3, Arg(("B",), kind="long:N"))),
    Pattern(index_with_tensor_pair, (X, Arg(("K",), kind="long:B"), Arg(("K",), kind="long:D"))),
    Pattern(gather_by_expanded_column, (X3, Arg(("K",), kind="long:N"))),
]


@pytest.mark.parametrize("pattern", INDEXING_PATTERNS, ids=lambda p: p.name)
def test_indexing_pattern_matches_eager(pattern: Pattern) -> None:
    check_pattern(pattern)


@pytest.mark.parametrize("pattern", [*INDEXING_PATTERNS[1::4], INDEXING_PATTERNS[-1]], ids=lambda p: p.name)
def test_indexing_pattern_matches_eager_through_the_fusion_pass(pattern: Pattern) -> None:
    check_pattern(pattern, **fused_options())
