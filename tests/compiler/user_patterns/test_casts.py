"""Dtype casts the way users write them (every spelling, around reductions and losses, integer and
bool casts, mixed-dtype promotion), jitted against eager: tests/support/user_patterns.py."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests.support.user_patterns import Arg, Pattern, check_pattern, fused_options

X = Arg(("B", "D"))
Y = Arg(("B", "D"))
W = Arg(("D",))


def float_method(x):
    return x.float() * 2


def half_then_back(x):
    return (x.half() + 1).to(x.dtype)


def bfloat16_round_trip(x):
    return x.bfloat16().float().sin()


def to_dtype(x):
    return x.to(torch.float32).exp().to(x.dtype)


def to_other_tensor(x, w):
    return x.float().to(w) * w


def type_as(x, w):
    return (x.double() * 2).type_as(w) + w


def to_dtype_copy(x):
    y = x.to(dtype=torch.float32, copy=True)
    return y.mul_(2), x


def type_method(x):
    return x.type(torch.float16).sigmoid().type(torch.float32)


def to_same_dtype(x):
    return x.to(x.dtype) + x.to(dtype=x.dtype, copy=False)


def to_device_and_dtype(x):
    return x.to(x.device, torch.float32) + x.to(device=x.device)


def double_round_trip(x):
    return x.double().sum(-1).to(x.dtype)


def integer_or_float_input(x):
    return x.float() / 2, x.to(torch.float16) + 1, x * 2, (x > 0).sum(-1), x.abs().max(-1).values


def cross_entropy_upcast(logits, target):
    return F.cross_entropy(logits.float(), target)


def cross_entropy_upcast_view(logits, target):
    return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), target.view(-1), ignore_index=0)


def nll_log_softmax_upcast(logits, target):
    return F.nll_loss(F.log_softmax(logits.float(), dim=-1), target, reduction="sum")


def softmax_upcast_back(x):
    return torch.softmax(x.float(), -1).to(x.dtype)


def softmax_dtype_arg(x):
    return F.softmax(x, dim=-1, dtype=torch.float32)


def log_softmax_dtype_back(x):
    return x.log_softmax(-1, dtype=torch.float32).type_as(x)


def rms_norm_fp32(x, w):
    variance = x.float().pow(2).mean(-1, keepdim=True)
    return w * (x.float() * torch.rsqrt(variance + 1e-6)).to(x.dtype)


def layer_norm_fp32_stats(x, w):
    h = x.float()
    mean = h.mean(-1, keepdim=True)
    var = h.var(-1, keepdim=True, unbiased=False)
    return ((h - mean) / torch.sqrt(var + 1e-5)).to(x.dtype) * w


def sum_dtype_kwarg(x):
    return x.sum(-1, dtype=torch.float32), x.mean(0, dtype=torch.float32)


def cast_after_reduction(x):
    return x.amax(-1).float() + x.sum(0).float().mean()


def mse_upcast(x, y):
    return F.mse_loss(x.float(), y.float()).to(x.dtype)


def bce_with_logits_upcast(x, y):
    return F.binary_cross_entropy_with_logits(x.float(), torch.sigmoid(y.float()))


def long_cast_of_float(x):
    return (x * 3).long(), (x * 3).int().float(), x.to(torch.int64) + 1


def bool_cast_of_float(x):
    return x.bool(), (x > 0).float() * x, (x > 0).to(x.dtype)


def int_tensor_plus_float_scalar(i):
    return i + 1.5, i * 0.5, i / 2, i // 2


def int_tensor_times_float_tensor(i, x):
    return i * x, (i + x).dtype


def bool_mask_times_float(m, x):
    return m * x, x * m[..., None].float().squeeze(-1), m.float().mean()


def mask_broadcast_last_dim(x, m):
    return x * m[..., None]


def masked_mean(x, m):
    mf = m.to(x.dtype)
    return (x * mf).sum(-1) / mf.sum(-1).clamp(min=1)


def int32_index_math(i):
    return (i.to(torch.int32) * 2 + 1).long(), i.int() % 3


def float_to_bool_and_back(x):
    return torch.where(x.bool(), x, 1.0).sum(), x.ne(0).sum(-1)


def python_scalar_promotion(x):
    return x * 2.5 + 1, 2 ** x.clamp(-3, 3), x.float() / 3


def half_accumulated_in_float(x, y):
    acc = torch.zeros(x.shape, dtype=torch.float32)
    acc += x.float()
    acc += y.float()
    return acc.to(x.dtype)


def empty_like_dtype(x):
    out = torch.empty_like(x, dtype=torch.float32)
    out.copy_(x)
    return out + torch.zeros_like(x, dtype=torch.float64).float(), torch.ones_like(x, dtype=torch.long)


def full_like_dtype(x):
    return torch.full_like(x, 3, dtype=torch.int32) + x.long(), torch.full_like(x, float("-inf")).exp()


def new_tensor_factories(x):
    return x.new_zeros(x.shape[0]) + x.sum(-1), x.new_ones((2, x.shape[-1]), dtype=torch.float32), x.new_full((3,), 2.0)


def autocast_style_matmul(x, w):
    return (x.float() @ w.float()[:, None]).to(x.dtype).squeeze(-1)


CAST_PATTERNS = [
    Pattern(float_method, (X,)),
    # NOTE: nvFuser computes a chain through a lower precision in float32 (translations.py `_convert`)
    Pattern(half_then_back, (X,), inner=torch.float16),
    Pattern(bfloat16_round_trip, (X,), inner=torch.bfloat16),
    Pattern(to_dtype, (X,)),
    Pattern(to_other_tensor, (X, Arg(("D",), kind="f32"))),
    Pattern(type_as, (X, W)),
    Pattern(to_dtype_copy, (X,)),
    Pattern(type_method, (X,), inner=torch.float16),
    Pattern(to_same_dtype, (X,)),
    Pattern(to_device_and_dtype, (X,)),
    Pattern(double_round_trip, (X,)),
    # NOTE: one jitted function called with float32, int64, int32 and bfloat16 inputs in turn
    Pattern(integer_or_float_input, (X,), dtypes=(torch.float32, torch.int64, torch.int32, torch.bfloat16)),
    Pattern(cross_entropy_upcast, (X, Arg(("B",), kind="long:D"))),
    Pattern(cross_entropy_upcast_view, (Arg(("B", "N", "D")), Arg(("B", "N"), kind="long:D"))),
    Pattern(nll_log_softmax_upcast, (X, Arg(("B",), kind="long:D"))),
    Pattern(softmax_upcast_back, (X,)),
    Pattern(softmax_dtype_arg, (X,)),
    Pattern(log_softmax_dtype_back, (X,)),
    Pattern(rms_norm_fp32, (X, W)),
    Pattern(layer_norm_fp32_stats, (Arg(("B", "N", "D")), W)),
    Pattern(sum_dtype_kwarg, (X,)),
    Pattern(cast_after_reduction, (X,)),
    Pattern(mse_upcast, (X, Y)),
    Pattern(bce_with_logits_upcast, (X, Y)),
    Pattern(long_cast_of_float, (X,)),
    Pattern(bool_cast_of_float, (X,)),
    Pattern(int_tensor_plus_float_scalar, (Arg(("B", "D"), kind="long:9"),), dtypes=(torch.float32,)),
    Pattern(int_tensor_times_float_tensor, (Arg(("B", "D"), kind="int:9"), X)),
    Pattern(bool_mask_times_float, (Arg(("B", "D"), kind="bool"), X)),
    Pattern(mask_broadcast_last_dim, (Arg(("B", "N", "D")), Arg(("B", "N"), kind="bool"))),
    Pattern(masked_mean, (X, Arg(("B", "D"), kind="mask"))),
    Pattern(int32_index_math, (Arg(("B", "D"), kind="long:7"),), dtypes=(torch.float32,)),
    Pattern(float_to_bool_and_back, (X,)),
    Pattern(python_scalar_promotion, (X,)),
    Pattern(half_accumulated_in_float, (X, Y)),
    Pattern(empty_like_dtype, (X,)),
    Pattern(full_like_dtype, (X,)),
    Pattern(new_tensor_factories, (X,)),
    Pattern(autocast_style_matmul, (X, W)),
]


@pytest.mark.parametrize("pattern", CAST_PATTERNS, ids=lambda p: p.name)
def test_cast_pattern_matches_eager(pattern: Pattern) -> None:
    check_pattern(pattern)


@pytest.mark.parametrize("pattern", CAST_PATTERNS[:20:3], ids=lambda p: p.name)
def test_cast_pattern_matches_eager_through_the_fusion_pass(pattern: Pattern) -> None:
    check_pattern(pattern, **fused_options())
