"""Shape code as model code writes it: `.view(-1, x.size(-1))`, `.view(*x.shape[:-1], h, d)`,
unflatten/flatten ranges, movedim and negative permutes, `.mT`/`.T`, einsum strings of attention
code, narrow/unbind/chunk/split with uneven sizes, stack/cat of views, shape arithmetic, jitted
against eager: tests/support/user_patterns.py."""

from __future__ import annotations

import pytest
import torch

from tests.support.user_patterns import Arg, Pattern, check_pattern, fused_options

X = Arg(("B", "D"))
X3 = Arg(("B", "N", "D"))
X4 = Arg(("B", "K", "N", "D"))
W = Arg(("D",))
EVEN = ({"B": 3, "N": 5, "D": 6, "K": 2}, {"B": 1, "N": 1, "D": 2, "K": 1}, {"B": 2, "N": 7, "D": 4, "K": 3})


def view_rows_of_last_dim(x, w):
    flat = x.view(-1, x.size(-1))
    return (flat * w).sum(-1).view(x.shape[:-1]), flat.reshape(x.shape[0], -1).mean(-1)


def view_star_shape_heads(x):
    h = x.view(*x.shape[:-1], 2, x.shape[-1] // 2)
    return h.transpose(-2, -3).softmax(-1), h.reshape(*x.shape[:-1], -1) * 2


def unflatten_flatten_ranges(x):
    h = x.unflatten(-1, (2, -1))
    return h.flatten(-2) + x, h.flatten(0, 1).sum(-1), x.flatten(start_dim=1, end_dim=-1).unflatten(1, x.shape[1:])


def movedim_and_negative_permute(x4):
    return x4.movedim(1, -1) * 2, x4.permute(0, -2, -3, -1).sum(1), torch.movedim(x4, (0, 1), (-1, -2)).cos()


def mT_and_T(x, y):
    return x.T @ y, (x.mT * 2).sum(0), torch.einsum("ij,ij->j", x.T.T, y)


def einsum_attention_strings(q, k):
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) * q.shape[-1] ** -0.5
    out = torch.einsum("bhqk,bhkd->bhqd", scores.softmax(-1), k)
    return out, torch.einsum("...d,...d->...", q, k), torch.einsum("b h n d -> b n h d", q)


def einsum_bilinear_and_batch_outer(x, w):
    return torch.einsum("bi,i,bi->b", x, w, x), torch.einsum("bi,bj->bij", x, x).sum(-1), torch.einsum("i,i->", w, w)


def narrow_with_negative_start(x):
    return x.narrow(-1, 0, x.size(-1) // 2) - x.narrow(-1, x.size(-1) // 2, x.size(-1) // 2), x.narrow(0, -1, 1)


def unbind_stack_back(x):
    rows = x.unbind(1)
    return torch.stack(rows, dim=-1) * 2, torch.stack([r.sum(-1) for r in rows]), rows[-1]


def chunk_uneven(x):
    pieces = x.chunk(4, dim=-1)
    return [p * (i + 1) for i, p in enumerate(pieces)], len(pieces)


def split_list_uneven(x):
    head, mid, tail = x.split([1, 2, x.shape[-1] - 3], dim=-1)
    return head * 3, mid.sum(-1), tail.flip(-1), torch.split(x, 4, dim=-1)[-1] + 1


def qkv_split_projection(x, w):
    qkv = x[..., None] * w
    q, k, v = qkv.split(w.shape[0] // 3, dim=-1)
    return (q * k).sum(-1, keepdim=True) * v


def qkv_chunk_heads(x):
    q, k, v = x.chunk(3, dim=-1)
    b, n, d = q.shape
    q, k, v = (t.view(b, n, 1, d).transpose(1, 2) for t in (q, k, v))
    att = (q @ k.transpose(-2, -1)).softmax(-1)
    return (att @ v).transpose(1, 2).contiguous().view(b, n, d)


def expand_as_and_broadcast_to(x, w):
    return w.expand_as(x) + x, torch.broadcast_to(w, x.shape) * x, w[None, :].expand(x.size(0), -1).sum(0)


def repeat_interleave_counts(x, reps):
    return x.repeat_interleave(2, dim=-1), torch.repeat_interleave(x, 3, dim=0), x.repeat_interleave(reps.shape[0], -2)


def repeat_kv_heads(x4):
    b, h, n, d = x4.shape
    expanded = x4[:, :, None, :, :].expand(b, h, 2, n, d)
    return expanded.reshape(b, h * 2, n, d) * 1, x4.repeat_interleave(2, dim=1).sum()


def stack_and_cat_of_views(x):
    a, b = x[:, :2], x[:, -2:]
    return torch.stack([a, b.flip(-1), a.t().t()]), torch.cat([a.T, b.T], dim=0), torch.cat([x[:, None], x[:, None]], 1)


def index_none_and_last(x3):
    return x3[..., None] * x3[..., None, :], x3[:, -1], x3[:, -1:, :].squeeze(1) + x3[:, 0]


def shape_arithmetic(x3):
    b = x3.size(0)
    n = x3.shape[1]
    return x3.reshape(b * n, -1) * 2, x3.new_zeros(b * 2, n + 1), x3.view(b, -1).shape[1] // 2, x3.reshape(-1)[: b * 2]


def reshape_with_shape_entries(x3):
    return x3.reshape(x3.shape[0], -1).sum(-1), x3.reshape((x3.shape[0] * x3.shape[1], x3.shape[2])).amax(0)


def contiguous_after_transpose_then_view(x3):
    t = x3.transpose(1, 2).contiguous()
    return t.view(x3.shape[0], -1) * 2, t.view(-1, x3.shape[1]).mean(0)


def permute_contiguous_view_back(x4):
    b, k, n, d = x4.shape
    merged = x4.permute(0, 2, 1, 3).contiguous().view(b, n, k * d)
    return merged.view(b, n, k, d).permute(0, 2, 1, 3) - x4


def squeeze_negative_and_unsqueeze_chain(x):
    return x.unsqueeze(-1).unsqueeze(-1).squeeze(-2) * 2, x[:, :, None].squeeze(-1).unsqueeze(0)


def view_as_and_flatten_outputs(x, y):
    return (x * y).view_as(y).flatten(), torch.flatten(x[None, None], 0, 2)


def window_view_sum(x3):
    b, n, d = x3.shape
    return x3.view(b, n * d // 2, 2).sum(-1).view(b, n, d // 2)


def atleast_and_ravel(x, w):
    return torch.atleast_2d(w) + x, x.ravel() * 2, torch.atleast_3d(x).sum(-1)


def expand_then_contiguous_then_write(x, w):
    h = w.expand(x.shape[0], -1).contiguous()
    h[:, 0] = 0.0
    return h * x


SHAPE_PATTERNS = [
    Pattern(view_rows_of_last_dim, (X3, W)),
    Pattern(view_star_shape_heads, (X3,), sizes=EVEN),
    Pattern(unflatten_flatten_ranges, (X3,), sizes=EVEN),
    Pattern(movedim_and_negative_permute, (X4,)),
    Pattern(mT_and_T, (X, Arg(("B", "D")))),
    Pattern(einsum_attention_strings, (X4, X4)),
    Pattern(einsum_bilinear_and_batch_outer, (X, W)),
    Pattern(narrow_with_negative_start, (X,), sizes=EVEN),
    Pattern(unbind_stack_back, (X3,)),
    Pattern(chunk_uneven, (X,)),
    Pattern(split_list_uneven, (X,), sizes=({"B": 3, "D": 6}, {"B": 1, "D": 3}, {"B": 2, "D": 9})),
    Pattern(qkv_split_projection, (X, Arg(("D",))), sizes=({"B": 3, "D": 6}, {"B": 1, "D": 3}, {"B": 2, "D": 9})),
    Pattern(
        qkv_chunk_heads, (X3,), sizes=({"B": 3, "N": 5, "D": 6}, {"B": 1, "N": 1, "D": 3}, {"B": 2, "N": 4, "D": 9})
    ),
    Pattern(expand_as_and_broadcast_to, (X, W)),
    Pattern(repeat_interleave_counts, (X, Arg(("B",), kind="long:3"))),
    Pattern(repeat_kv_heads, (X4,)),
    Pattern(stack_and_cat_of_views, (X,), sizes=EVEN),
    Pattern(index_none_and_last, (X3,)),
    Pattern(shape_arithmetic, (X3,)),
    Pattern(reshape_with_shape_entries, (X3,)),
    Pattern(contiguous_after_transpose_then_view, (X3,)),
    Pattern(permute_contiguous_view_back, (X4,)),
    Pattern(squeeze_negative_and_unsqueeze_chain, (X,)),
    Pattern(view_as_and_flatten_outputs, (X, Arg(("B", "D")))),
    Pattern(window_view_sum, (X3,), sizes=EVEN),
    Pattern(atleast_and_ravel, (X, W)),
    Pattern(expand_then_contiguous_then_write, (X, W)),
]


@pytest.mark.parametrize("pattern", SHAPE_PATTERNS, ids=lambda p: p.name)
def test_shape_pattern_matches_eager(pattern: Pattern) -> None:
    check_pattern(pattern)


@pytest.mark.parametrize("pattern", SHAPE_PATTERNS[1::3], ids=lambda p: p.name)
def test_shape_pattern_matches_eager_through_the_fusion_pass(pattern: Pattern) -> None:
    check_pattern(pattern, **fused_options())
