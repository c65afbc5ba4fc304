"""Precision handling as model code writes it: upcasts around softmax, logsumexp and reductions
(with and without `dtype=`), RMSNorm written four ways, `finfo` masks, `.to` chains through other
tensors, casts of python-scalar tensors, jitted against eager: tests/support/user_patterns.py."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests.support.user_patterns import Arg, Pattern, check_pattern, fused_options

X = Arg(("B", "D"))
X3 = Arg(("B", "N", "D"))
W = Arg(("D",))
MASK = Arg(("B", "D"), kind="mask")
EPS = 1e-6


def rms_norm_llama(x, w):
    input_dtype = x.dtype
    h = x.to(torch.float32)
    variance = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(variance + EPS)
    return w * h.to(input_dtype)


def rms_norm_t5(x, w):
    variance = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
    h = x * torch.rsqrt(variance + EPS)
    if w.dtype in (torch.float16, torch.bfloat16):
        h = h.to(w.dtype)
    return w * h


def rms_norm_gemma(x, w):
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS)
    return (h * (1.0 + w.float())).type_as(x)


def rms_norm_norm_based(x, w):
    rms = x.float().norm(2, dim=-1, keepdim=True) * x.shape[-1] ** -0.5
    return (x.float() / (rms + EPS)).to(x.dtype) * w


def rms_norm_square_mean_sqrt(x, w):
    h = x.float()
    return w * (h / torch.sqrt(torch.mean(h * h, dim=-1, keepdim=True) + EPS)).half().to(x.dtype)


def layer_norm_upcast_functional(x, w, b):
    return F.layer_norm(x.float(), (x.shape[-1],), w.float(), b.float()).to(x.dtype)


def group_stats_in_float(x):
    h = x.float()
    mean = h.mean(-1, keepdim=True)
    return ((h - mean) * torch.rsqrt(h.var(-1, keepdim=True, correction=0) + 1e-5)).to(x.dtype)


def softmax_then_cast_to_query_dtype(q, k):
    scores = torch.matmul(q, k.transpose(-1, -2)) / (q.shape[-1] ** 0.5)
    probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
    return torch.matmul(probs, k)


def softmax_float_then_type_as(q, k):
    scores = q @ k.mT
    return scores.float().softmax(dim=-1).type_as(scores) @ k


def attention_finfo_mask(q, k, m):
    scores = q @ k.transpose(-2, -1) * q.size(-1) ** -0.5
    scores = scores.masked_fill(~m[:, None, :], torch.finfo(scores.dtype).min)
    return scores.softmax(-1)


def logsumexp_upcast(x):
    return torch.logsumexp(x.float(), dim=-1), x.float().logsumexp(-1, keepdim=True).to(x.dtype)


def log_softmax_via_logsumexp(x):
    h = x.float()
    return (h - h.logsumexp(-1, keepdim=True)).to(x.dtype)


def softmax_by_hand(x):
    h = x.float()
    e = (h - h.max(dim=-1, keepdim=True).values).exp()
    return (e / e.sum(-1, keepdim=True)).to(x.dtype)


def mean_dtype_kwarg_then_cast(x):
    return x.mean(-1, dtype=torch.float32).to(x.dtype), x.sum(dtype=torch.float32)


def prod_and_cumsum_dtype(x):
    return torch.cumsum(x, dim=-1, dtype=torch.float32), x.float().prod(-1), x.cumsum(0).float()


def max_in_low_then_float(x):
    return x.max(-1).values.float(), x.float().amax(-1), x.amin(-1, keepdim=True).to(torch.float32)


def cast_before_and_after_reduction(x):
    return x.float().sum(-1).to(x.dtype) + x.sum(-1), x.square().float().mean()


def to_other_tensor_dtype_and_back(x, w):
    h = x.to(w.dtype) * w.to(x)
    return h.to(device=x.device, dtype=x.dtype)


def type_string_and_type_method(x):
    return (
        x.type(torch.float32) * 2,
        x.type_as(x.float()).mean(),
        x.type(),
        x.type(x.double().type()).sum(-1),
        x.type(torch.HalfTensor if x.device.type == "cpu" else torch.cuda.HalfTensor),
    )


def half_bfloat16_double_chain(x):
    return x.half().float() + x.bfloat16().float() + x.double().float()


def finfo_masked_fill_where(x, m):
    neg = torch.finfo(x.dtype).min
    return torch.where(m, x, neg).softmax(-1), x.masked_fill(~m, neg).max(-1).values


def finfo_eps_and_tiny(x):
    info = torch.finfo(x.dtype)
    return x / (x.abs().sum(-1, keepdim=True) + info.eps), x.clamp(min=info.tiny), x.clamp(info.min, info.max)


def where_scalar_zero_float(x, m):
    return torch.where(m, x, 0.0) * 2, torch.where(~m, 0, x), torch.where(m, x.float(), -1)


def scalar_tensor_on_device(x):
    scale = torch.tensor(0.5, device=x.device)
    bias = torch.tensor([1.0], device=x.device, dtype=x.dtype)
    return x * scale, x + bias, x * torch.tensor(2, device=x.device)


def scalar_tensor_as_tensor(x):
    return x * torch.as_tensor(3.0, dtype=x.dtype, device=x.device), torch.scalar_tensor(2.0) * x


def zeros_like_dtype_accumulate(x):
    acc = torch.zeros_like(x, dtype=torch.float32)
    acc = acc + x.float() * 0.5
    return acc, torch.ones_like(x, dtype=torch.float32).sum(-1) + x.sum(-1)


def new_factories_with_dtype(x):
    return (
        x.new_zeros(x.shape, dtype=torch.float32) + x,
        x.new_full((x.shape[0], 1), -1.0) * x,
        x.new_tensor([1.0, 2.0]).sum() * x,
        x.new_ones(x.shape[-1]) + x,
    )


def upcast_weight_and_input(x, w):
    return (x.float() * w.float()).sum(-1).to(x.dtype), torch.mul(x, w.to(torch.float32))


def pow_two_with_dtype(x):
    return x.float().pow(2), x.pow(2.0).float(), torch.pow(x.float(), 0.5 * 4), x.float() ** 2


def bool_sum_mean_cast(m):
    return m.sum(), m.sum(-1, dtype=torch.float32), m.float().mean(), m.to(torch.int32).sum(0), m.long().cumsum(-1)


def softmax_dtype_then_log(x):
    return torch.softmax(x, -1, dtype=torch.float32).clamp_min(1e-9).log(), F.log_softmax(x.double(), -1).float()


def cast_after_softmax_into_matmul(q, k):
    probs = (q @ k.mT).softmax(-1).float()
    return probs @ k.float()


def sigmoid_upcast_gate(x, y):
    return (torch.sigmoid(x.float()) * y.float()).to(y.dtype), F.silu(x.float()).to(x.dtype) * y


def double_precision_stats(x):
    h = x.double()
    return h.mean(-1).float(), (h - h.mean()).pow(2).sum().float()


PRECISION_PATTERNS = [
    Pattern(rms_norm_llama, (X3, W)),
    Pattern(rms_norm_t5, (X3, W)),
    Pattern(rms_norm_gemma, (X3, W)),
    Pattern(rms_norm_norm_based, (X3, W)),
    Pattern(rms_norm_square_mean_sqrt, (X3, W), inner=torch.float16),
    Pattern(layer_norm_upcast_functional, (X3, W, W)),
    Pattern(group_stats_in_float, (X3,)),
    Pattern(softmax_then_cast_to_query_dtype, (X3, X3)),
    Pattern(softmax_float_then_type_as, (X3, X3)),
    Pattern(attention_finfo_mask, (X3, X3, Arg(("B", "N"), kind="mask"))),
    Pattern(logsumexp_upcast, (X,)),
    Pattern(log_softmax_via_logsumexp, (X,)),
    Pattern(softmax_by_hand, (X3,)),
    Pattern(mean_dtype_kwarg_then_cast, (X,)),
    Pattern(prod_and_cumsum_dtype, (X,)),
    Pattern(max_in_low_then_float, (X,)),
    Pattern(cast_before_and_after_reduction, (X,)),
    Pattern(to_other_tensor_dtype_and_back, (X, Arg(("D",), kind="f32"))),
    Pattern(type_string_and_type_method, (X,), dtypes=(torch.float32,)),
    Pattern(half_bfloat16_double_chain, (X,), inner=torch.bfloat16),
    Pattern(finfo_masked_fill_where, (X, MASK)),
    Pattern(finfo_eps_and_tiny, (X,)),
    Pattern(where_scalar_zero_float, (X, Arg(("B", "D"), kind="bool"))),
    Pattern(scalar_tensor_on_device, (X,)),
    Pattern(scalar_tensor_as_tensor, (X,)),
    Pattern(zeros_like_dtype_accumulate, (X,)),
    Pattern(new_factories_with_dtype, (X,)),
    Pattern(upcast_weight_and_input, (X, W)),
    Pattern(pow_two_with_dtype, (X,)),
    Pattern(bool_sum_mean_cast, (Arg(("B", "D"), kind="bool"),), dtypes=(torch.float32,)),
    Pattern(softmax_dtype_then_log, (X,)),
    Pattern(cast_after_softmax_into_matmul, (X3, X3)),
    Pattern(sigmoid_upcast_gate, (X, Arg(("B", "D")))),
    Pattern(double_precision_stats, (X,)),
]


@pytest.mark.parametrize("pattern", PRECISION_PATTERNS, ids=lambda p: p.name)
def test_precision_pattern_matches_eager(pattern: Pattern) -> None:
    check_pattern(pattern)


@pytest.mark.parametrize("pattern", PRECISION_PATTERNS[::3], ids=lambda p: p.name)
def test_precision_pattern_matches_eager_through_the_fusion_pass(pattern: Pattern) -> None:
    check_pattern(pattern, **fused_options())
