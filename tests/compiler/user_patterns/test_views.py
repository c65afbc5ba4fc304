"""Views the way users write them (view/reshape, permutes and transposes, squeezes, expands,
narrow/unbind/split/chunk, diagonal, unfold, as_strided, cat/stack of views, layouts), jitted against
eager: tests/support/user_patterns.py."""

from __future__ import annotations

import pytest
import torch

from tests.support.user_patterns import Arg, Pattern, check_pattern, fused_options

X = Arg(("B", "D"))
X3 = Arg(("B", "N", "D"))
W = Arg(("D",))
EVEN = ({"B": 3, "N": 5, "D": 6}, {"B": 1, "N": 1, "D": 2}, {"B": 2, "N": 7, "D": 4})


def view_minus_one(x):
    return x.view(-1) * 2, x.view(x.size(0), -1, 2).sum(-1)


def reshape_after_transpose(x):
    return x.t().reshape(x.shape[1], -1) + 1, x.transpose(0, 1).reshape(-1)


def flatten_unflatten(x):
    y = x.flatten(1)
    return y.unflatten(1, (x.shape[1], x.shape[2])) * 2, x.flatten() + 1, x.flatten(0, 1).sum(0)


def permute_then_contiguous(x):
    return x.permute(2, 0, 1).contiguous() * 2, x.permute(0, 2, 1).sum(-1)


def transpose_matmul(x):
    return x @ x.T, x.mT @ x


def heads_split_and_merge(x):
    b, n, d = x.shape
    h = x.view(b, n, 2, d // 2).transpose(1, 2)
    scores = h @ h.transpose(-2, -1)
    return (scores.softmax(-1) @ h).transpose(1, 2).reshape(b, n, d)


def movedim_swapaxes(x):
    return x.movedim(-1, 0) + 1, x.swapaxes(0, 2).sin(), x.moveaxis(0, -1).cos()


def squeeze_unsqueeze(x):
    y = x.unsqueeze(1).unsqueeze(-1)
    return y.squeeze(-1).squeeze(1) * 2, y.squeeze() + 0, x[None, :, None].sum(0)


def squeeze_dims_tuple(x):
    return x[:, None, :, None].squeeze((1, 3)) * x


def index_none_ellipsis(x, w):
    return x[..., None] * w[None, None, :], x[:, None] - x[None, :]


def expand_and_expand_as(x, w):
    return w.expand(x.shape[0], -1) + x, w.expand_as(x) * x, w[None].expand(3, *x.shape).sum(0)


def narrow_pieces(x):
    return x.narrow(-1, 1, 2) * 2, x.narrow(0, 0, 1).sum()


def unbind_rows(x):
    a, *rest = x.unbind(-1)
    return a + sum(rest), torch.stack(x.unbind(0), 1)


def split_sizes_and_chunk(x):
    a, b = x.split([2, x.shape[-1] - 2], dim=-1)
    c, d = x.chunk(2, dim=-1)
    return a.sum(-1) + b.sum(-1), c * d


def split_equal(x):
    return [p.sum(-1) for p in x.split(2, dim=-1)]


def tensor_split_pieces(x):
    return [p * (i + 1) for i, p in enumerate(x.tensor_split(3, dim=-1))]


def tensor_split_indices(x):
    a, b, c = torch.tensor_split(x, [1, 3], dim=-1)
    return a.sum(-1), b.mean(-1), c


def view_as_other(x, y):
    return y.view_as(x) + x, x.reshape_as(y)


def diagonal_of_square(x):
    square = x[:, None] * x[None, :]
    return square.diagonal(dim1=-2, dim2=-1).sum(-1), torch.diagonal(square, 1, 0, 1), square.diagonal(-1).sum()


def unfold_windows(x):
    return x.unfold(-1, 2, 2).sum(-1), x.unfold(-1, 3, 1).amax(-1)


def cat_of_views(x):
    return torch.cat([x[:, :2], x[:, 2:].flip(-1), x.t()[:2].t()], dim=-1)


def stack_of_views(x):
    return torch.stack([x, x.transpose(-1, -2).transpose(-1, -2) * 2, x[..., ::1]], dim=0)


def cat_negative_dim_and_empty(x):
    return torch.cat([x, x[:, :0], x * 2], dim=-1), torch.cat((x,)).sum()


def hstack_vstack(x, w):
    return torch.hstack([x, x]), torch.vstack([x, w[None]]), torch.column_stack([w, w])


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def rotary_embedding(x, w):
    cos, sin = w.cos(), w.sin()
    return x * cos + rotate_half(x) * sin


def clone_memory_formats(x):
    y = x.clone(memory_format=torch.contiguous_format)
    z = x.clone(memory_format=torch.preserve_format)
    return y * 2, z + 1, y.is_contiguous()


def channels_last_clone(x):
    y = x.clone(memory_format=torch.channels_last)
    return y * 2, y.is_contiguous(memory_format=torch.channels_last), x.contiguous(memory_format=torch.channels_last)


def contiguous_then_view(x):
    return x.transpose(0, 1).contiguous().view(-1) + 1


def flip_roll(x):
    return x.flip(0) + x.roll(1, -1), torch.roll(x, shifts=(1, -1), dims=(0, 1)), x.fliplr()


def repeat_and_tile(x):
    return x.repeat(2, 1), x.tile((1, 2)), x.repeat_interleave(2, dim=0)


def size_arithmetic(x):
    b, n, d = x.shape
    return x.reshape(b * n, d).mean(0) * (x.numel() / x.size(-1)), x.new_zeros(x.ndim)


def transpose_sum_grad(x, w):
    return (x.transpose(0, -1) * w[:, None, None]).sum()


def select_and_slices(x):
    return x[0], x[-1, ::2], x[:, -2:], x[1:, 1::2], x.select(1, 0)


def layout_queries(x):
    y = x if x.is_contiguous() else x.contiguous()
    return y.view(-1) * 2, x.stride(), x.stride(-1), x.t().is_contiguous(), torch.zeros_like(x).stride()


def output_views_of_input(x):
    return x.view(-1), x.t(), x[1:]


VIEW_PATTERNS = [
    Pattern(view_minus_one, (X,), sizes=EVEN),
    Pattern(reshape_after_transpose, (X,)),
    Pattern(flatten_unflatten, (X3,)),
    Pattern(permute_then_contiguous, (X3,)),
    Pattern(transpose_matmul, (X,)),
    Pattern(heads_split_and_merge, (X3,), sizes=EVEN),
    Pattern(movedim_swapaxes, (X3,)),
    Pattern(squeeze_unsqueeze, (X,)),
    Pattern(squeeze_dims_tuple, (X,)),
    Pattern(index_none_ellipsis, (X, W)),
    Pattern(expand_and_expand_as, (X, W)),
    Pattern(narrow_pieces, (X,)),
    Pattern(unbind_rows, (X,)),
    Pattern(split_sizes_and_chunk, (X,), sizes=EVEN[:1] + EVEN[2:]),
    Pattern(split_equal, (X,), sizes=EVEN),
    Pattern(tensor_split_pieces, (X,)),
    Pattern(tensor_split_indices, (X,)),
    Pattern(view_as_other, (X, Arg(("B", "D")))),
    Pattern(diagonal_of_square, (X,)),
    Pattern(unfold_windows, (X,)),
    Pattern(cat_of_views, (X,)),
    Pattern(stack_of_views, (X3,)),
    Pattern(cat_negative_dim_and_empty, (X,)),
    Pattern(hstack_vstack, (X, W)),
    Pattern(rotary_embedding, (X3, W), sizes=EVEN),
    Pattern(clone_memory_formats, (X3,)),
    Pattern(channels_last_clone, (Arg(("B", "K", "N", "D")),)),
    Pattern(contiguous_then_view, (X3,)),
    Pattern(flip_roll, (X,)),
    Pattern(repeat_and_tile, (X,)),
    Pattern(size_arithmetic, (X3,)),
    Pattern(transpose_sum_grad, (X3, Arg(("D",)))),
    Pattern(select_and_slices, (X3,)),
    Pattern(layout_queries, (X,)),
    Pattern(output_views_of_input, (X,)),
]


@pytest.mark.parametrize("pattern", VIEW_PATTERNS, ids=lambda p: p.name)
def test_view_pattern_matches_eager(pattern: Pattern) -> None:
    check_pattern(pattern)


@pytest.mark.parametrize("pattern", VIEW_PATTERNS[::4], ids=lambda p: p.name)
def test_view_pattern_matches_eager_through_the_fusion_pass(pattern: Pattern) -> None:
    check_pattern(pattern, **fused_options())
