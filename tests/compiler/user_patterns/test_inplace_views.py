"""In-place updates through views as model code writes them (`x[..., :3] *= 2`, `narrow().copy_`,
`out[idx] = v`, in-place methods with their keyword arguments, caches written by slices), into
inputs and into intermediates that require grad, jitted against eager: tests/support/user_patterns.py."""

from __future__ import annotations

import pytest
import torch

from tests.support.user_patterns import Arg, Pattern, check_pattern, fused_options

X = Arg(("B", "D"))
X3 = Arg(("B", "N", "D"))
OUT = Arg(("B", "D"), written=True)
OUT3 = Arg(("B", "N", "D"), written=True)
Y = Arg(("B", "D"), grad=False)
W = Arg(("D",), grad=False)
WIDE = ({"B": 3, "N": 5, "D": 6, "K": 2}, {"B": 1, "N": 1, "D": 4, "K": 1}, {"B": 2, "N": 7, "D": 5, "K": 3})


def ellipsis_slice_times_equal(out):
    out[..., :3] *= 2
    out[..., -1:] += 1
    return out


def narrow_copy_into_input(out, y):
    out.narrow(-1, 1, 2).copy_(y[:, :2])
    out.narrow(0, 0, 1).fill_(-1)
    return out


def index_tensor_assign(out, idx, v):
    out[idx] = v[: idx.shape[0]]
    return out


def index_tensor_assign_scalar_and_add(out, idx):
    out[idx] = 0.5
    out[:, 0] += out[:, 1]
    return out


def masked_fill_clamp_in_place(out, m):
    out.masked_fill_(~m, 0.0).clamp_(-0.5, 0.5)
    return out


def add_alpha_sub_alpha(out, y, w):
    out.add_(y, alpha=0.1)
    out.sub_(w, alpha=2)
    return out


def addcmul_addcdiv_in_place(out, y, w):
    out.addcmul_(y, w, value=-0.5)
    out.addcdiv_(y, w.abs() + 1, value=0.25)
    return out


def lerp_tensor_weight_in_place(out, y, w):
    out.lerp_(y, w.sigmoid())
    return out


def ema_update(out, y):
    out.mul_(0.9).add_(y, alpha=0.1)
    return out


def adam_style_step(param, grad, exp_avg, exp_avg_sq):
    exp_avg.lerp_(grad, 0.1)
    exp_avg_sq.mul_(0.999).addcmul_(grad, grad, value=0.001)
    denom = (exp_avg_sq / 0.001).sqrt().add_(1e-8)
    param.addcdiv_(exp_avg, denom, value=-0.01)
    return param


def cache_update_by_slice(cache, new):
    n = new.shape[1]
    cache[:, -n:] = new
    return cache[:, :].sum(-1)


def cache_update_index_copy(cache, new, pos):
    cache.index_copy_(1, pos, new[:, : pos.shape[0]])
    return cache


def intermediate_ellipsis_write(x):
    h = x * 1.5
    h[..., :2] *= 2
    h[..., -1] = 0
    return h.exp()


def intermediate_narrow_copy(x, y):
    h = x.clone()
    h.narrow(-1, 0, 2).copy_(y[..., :2] * 3)
    return h * x


def intermediate_masked_fill_(x, m):
    h = x * 2
    h.masked_fill_(m, float("-inf"))
    return h.softmax(-1).nan_to_num()


def intermediate_clamp_relu_(x):
    h = x + 0.1
    h.clamp_(min=-0.5).relu_()
    return h.sum(-1)


def intermediate_transposed_write(x3):
    h = x3.transpose(1, 2).clone()
    h[:, 0] *= 0
    return h.transpose(1, 2) + x3


def intermediate_column_scaled_by_input(x, y):
    h = x * 2
    h[:, 0] *= y[:, 0]
    return h


def intermediate_view_written_and_returned(x, y):
    h = x.clone()
    v = h[:, :2]
    v.mul_(y[:, :2])
    return h, v


def intermediate_slice_accumulates_its_neighbour(x, y):
    h = x.exp()
    h[:, 1:3] += y[:, 1:3] * h[:, :2]
    return h


def intermediate_column_read_then_written(x, y):
    h = x.sigmoid()
    col = h[:, 0]
    h[:, 1] = col * y[:, 1]
    return h, col


def intermediate_narrow_copied_from_a_sibling(x, y):
    h = x + y
    top = h.narrow(1, 0, 2)
    h.narrow(1, 2, 2).copy_(top.flip(-1))
    return h * top.sum(-1, keepdim=True)


def intermediate_flat_view_written(x, y):
    h = x * 3
    v = h.view(-1)
    v[:2] = v[2:4] * y.view(-1)[:2]
    return h, v


def intermediate_unsqueezed_slice_scaled(x, y):
    a = x * 2
    b = a[:, :2]
    b.unsqueeze(0).mul_(y[None, :, :2])
    return a, b.sum()


def write_into_float_copy(x):
    h = x.float()
    h[..., 0] = 0.0
    h.mul_(2)
    return h.to(x.dtype), x


def setitem_with_broadcast_and_cast(out, w):
    out[:] = w.double()
    out[0, :] = 1
    return out


def select_write_in_loop(out3):
    for i in range(out3.shape[1]):
        out3[:, i] += i
    return out3


def zero_rows_by_bool_mask(out, m):
    out[m] = 0.0
    return out


def index_fill_and_put(out, idx):
    out.index_fill_(1, idx % out.shape[1], 0.0)
    out.index_put_((idx,), torch.ones((), dtype=out.dtype), accumulate=True)
    return out


def copy_in_place_of_cast(out, y):
    out.copy_(y.to(torch.float64) * 2)
    out.div_(2, rounding_mode=None)
    return out


def in_place_pow_exp_sqrt(out):
    out.abs_().add_(1).sqrt_().pow_(3).log_()
    return out


def fill_with_tensor_and_zero_(out, y):
    out[:, 0].fill_(y[0, 0])
    out[:, -1].zero_()
    return out


INPLACE_VIEW_PATTERNS = [
    Pattern(ellipsis_slice_times_equal, (OUT,)),
    Pattern(narrow_copy_into_input, (OUT, Y), sizes=WIDE),
    Pattern(index_tensor_assign, (OUT, Arg(("K",), kind="long:B"), Y)),
    Pattern(index_tensor_assign_scalar_and_add, (OUT, Arg(("K",), kind="long:B")), sizes=WIDE),
    Pattern(masked_fill_clamp_in_place, (OUT, Arg(("B", "D"), kind="mask"))),
    Pattern(add_alpha_sub_alpha, (OUT, Y, W)),
    Pattern(addcmul_addcdiv_in_place, (OUT, Y, W)),
    Pattern(lerp_tensor_weight_in_place, (OUT, Y, W)),
    Pattern(ema_update, (OUT, Y)),
    Pattern(adam_style_step, (OUT, Y, Arg(("B", "D"), written=True), Arg(("B", "D"), kind="pos", written=True))),
    Pattern(cache_update_by_slice, (OUT3, Arg(("B", "K", "D"), grad=False)), sizes=WIDE[:1] + WIDE[2:]),
    Pattern(cache_update_index_copy, (OUT3, Arg(("B", "K", "D"), grad=False), Arg(("K",), kind="long:N"))),
    Pattern(intermediate_ellipsis_write, (X,), sizes=WIDE),
    Pattern(intermediate_narrow_copy, (X, Y), sizes=WIDE),
    Pattern(intermediate_masked_fill_, (X, Arg(("B", "D"), kind="bool"))),
    Pattern(intermediate_clamp_relu_, (X,)),
    Pattern(intermediate_transposed_write, (X3,), sizes=WIDE),
    Pattern(intermediate_column_scaled_by_input, (X, Arg(("B", "D"))), sizes=WIDE),
    Pattern(intermediate_view_written_and_returned, (X, Arg(("B", "D"))), sizes=WIDE),
    *(
        Pattern(fn, (X, Arg(("B", "D"))), sizes=WIDE)
        for fn in (
            intermediate_slice_accumulates_its_neighbour,
            intermediate_column_read_then_written,
            intermediate_narrow_copied_from_a_sibling,
            intermediate_flat_view_written,
            intermediate_unsqueezed_slice_scaled,
        )
    ),
    Pattern(write_into_float_copy, (X,)),
    Pattern(setitem_with_broadcast_and_cast, (OUT, W)),
    Pattern(select_write_in_loop, (OUT3,)),
    Pattern(zero_rows_by_bool_mask, (OUT, Arg(("B", "D"), kind="bool"))),
    Pattern(index_fill_and_put, (OUT, Arg(("K",), kind="long:B"))),
    Pattern(copy_in_place_of_cast, (OUT, Y)),
    Pattern(in_place_pow_exp_sqrt, (OUT,)),
    Pattern(fill_with_tensor_and_zero_, (OUT, Y), sizes=WIDE),
]


@pytest.mark.parametrize("pattern", INPLACE_VIEW_PATTERNS, ids=lambda p: p.name)
def test_inplace_view_pattern_matches_eager(pattern: Pattern) -> None:
    check_pattern(pattern)


# NOTE: every write into an intermediate: regions run by torch return views of their results,
# which the in-place update passes must not overwrite
FUSED = [p for i, p in enumerate(INPLACE_VIEW_PATTERNS) if i % 3 == 0 or p.name.startswith("intermediate")]


@pytest.mark.parametrize("pattern", FUSED, ids=lambda p: p.name)
def test_inplace_view_pattern_matches_eager_through_the_fusion_pass(pattern: Pattern) -> None:
    check_pattern(pattern, **fused_options())
