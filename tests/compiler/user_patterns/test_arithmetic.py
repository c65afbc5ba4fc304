"""Arithmetic users write around the casts and views: einsum, rounding and integer division,
clamps and norms, factories with dtypes, scalar tensors, reductions with keepdim, jitted against
eager: tests/support/user_patterns.py."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests.support.user_patterns import Arg, Pattern, check_pattern, fused_options

X = Arg(("B", "D"))
Y = Arg(("B", "D"))
X3 = Arg(("B", "N", "D"))
W = Arg(("D",))
F32 = (torch.float32,)


def einsum_attention(q, k):
    scores = torch.einsum("bnd,bmd->bnm", q, k) / q.shape[-1] ** 0.5
    return torch.einsum("bnm,bmd->bnd", scores.softmax(-1), k)


def einsum_outer_and_trace(x, w):
    return (
        torch.einsum("bd,e->bde", x, w),
        torch.einsum("bd,bd->b", x, x),
        torch.einsum("ii", x[:, None, 0] * x[None, :, 0]),
    )


def rounding_family(x):
    return x.round(), torch.round(x * 10, decimals=1), x.floor(), x.ceil(), x.trunc(), x.frac()


def integer_division(i):
    return (
        i // 3,
        torch.floor_divide(i - 5, 2),
        i % 4,
        torch.remainder(i - 5, 3),
        torch.div(i, 3, rounding_mode="trunc"),
    )


def float_floor_divide_remainder(x):
    return x // 0.7, x % 0.7, torch.fmod(x, 0.7), torch.div(x, 0.3, rounding_mode="floor")


def clamp_variants(x, w):
    return x.clamp(-0.5, 0.5), x.clamp(min=w), torch.clamp(x, max=0.1), x.clip(-1, 1), F.hardtanh(x, -0.3, 0.3)


def norms_users_write(x):
    return (
        x.norm(dim=-1),
        torch.linalg.vector_norm(x, ord=2, dim=-1, keepdim=True),
        F.normalize(x, dim=-1),
        x.abs().sum(-1),
    )


def keepdim_reductions(x):
    return x.sum(-1, keepdim=True) / x.shape[-1], x.mean((0, 1), keepdim=True), x.var(-1, keepdim=True), x.std(-1)


def logsumexp_and_softplus(x):
    return x.logsumexp(-1), F.softplus(x), torch.log1p(x.exp()), x.sigmoid().log()


def scalar_tensor_arithmetic(x):
    scale = torch.tensor(0.5)
    eps = torch.tensor(1e-6, dtype=torch.float32)
    return x * scale + eps, x / x.sum().clamp(min=1.0), x - x.mean()


def arange_linspace_factories(x):
    n = x.shape[-1]
    pos = torch.arange(n, dtype=x.dtype)
    freqs = 1.0 / (10000 ** (torch.arange(0, n, 2).float() / n))
    return x + pos, torch.outer(pos.float(), freqs), torch.linspace(0, 1, n) * x.float()


def zeros_ones_full_dtype(x):
    z = torch.zeros(x.shape, dtype=torch.float32) + x
    o = torch.ones(x.shape[0], 1, dtype=x.dtype) * x
    f = torch.full((x.shape[-1],), 2, dtype=torch.int64)
    return z, o, f * 2, torch.zeros_like(x, dtype=torch.bool) | (x > 0)


def comparisons_and_logic(x, y):
    return (x > y) & (x > 0), (x == x), torch.logical_or(x < 0, y < 0), ~(x >= y), torch.isclose(x, y, atol=0.5)


def minimum_maximum_and_sign(x, y):
    return torch.maximum(x, y), torch.minimum(x, 0.0 * y), x.sign() * y.abs(), torch.copysign(x, y)


def nan_handling(x):
    y = torch.where(x > 1, float("nan"), x)
    return y.nan_to_num(0.0), torch.isnan(y).sum(), torch.nansum(y)


def cumsum_and_cumprod(x):
    return x.cumsum(-1), x.cumsum(0, dtype=torch.float32), (x.sigmoid() + 0.5).cumprod(-1)


def mixed_python_scalars(x):
    b, d = x.shape
    return x * (1.0 / d) + b, x**2 * 0.5, 1 - x, 2 / (x.abs() + 1)


def gelu_and_silu_variants(x):
    return F.gelu(x), F.gelu(x, approximate="tanh"), F.silu(x), x * torch.sigmoid(1.702 * x)


def matmul_variants(x, y):
    return x @ y.T, torch.mm(x, y.t()), torch.bmm(x[None], y.T[None]), torch.matmul(x, y[0]), x.matmul(y.T) * 0.5


def linear_with_casts(x, w):
    weight = w[:, None] * w[None, :]
    return F.linear(x.float(), weight.float()).to(x.dtype), F.linear(x, weight, w)


def softmax_cross_entropy_with_label_smoothing(x, t):
    return F.cross_entropy(x, t, label_smoothing=0.1), F.cross_entropy(x.float(), t, reduction="none")


def lerp_addcmul_functions(x, y, w):
    return torch.lerp(x, y, 0.3), torch.addcmul(x, y, w, value=0.5), torch.addcdiv(x, y, w.abs() + 1)


ARITHMETIC_PATTERNS = [
    Pattern(einsum_attention, (X3, X3)),
    Pattern(einsum_outer_and_trace, (X, W)),
    Pattern(rounding_family, (X,), grad=False),
    Pattern(integer_division, (Arg(("B", "D"), kind="long:20"),), dtypes=F32),
    Pattern(float_floor_divide_remainder, (X,), dtypes=F32, grad=False),
    Pattern(clamp_variants, (X, W)),
    Pattern(norms_users_write, (X,)),
    Pattern(keepdim_reductions, (X3,)),
    Pattern(logsumexp_and_softplus, (X,)),
    Pattern(scalar_tensor_arithmetic, (X,)),
    Pattern(arange_linspace_factories, (X,), sizes=({"B": 3, "D": 6}, {"B": 1, "D": 2}, {"B": 2, "D": 4})),
    Pattern(zeros_ones_full_dtype, (X,)),
    Pattern(comparisons_and_logic, (X, Y)),
    Pattern(minimum_maximum_and_sign, (X, Y)),
    Pattern(nan_handling, (X,)),
    Pattern(cumsum_and_cumprod, (X,)),
    Pattern(mixed_python_scalars, (X,)),
    Pattern(gelu_and_silu_variants, (X,)),
    Pattern(matmul_variants, (X, Y)),
    Pattern(linear_with_casts, (X, W)),
    Pattern(softmax_cross_entropy_with_label_smoothing, (X, Arg(("B",), kind="long:D"))),
    Pattern(lerp_addcmul_functions, (X, Y, W)),
]


@pytest.mark.parametrize("pattern", ARITHMETIC_PATTERNS, ids=lambda p: p.name)
def test_arithmetic_pattern_matches_eager(pattern: Pattern) -> None:
    check_pattern(pattern)


@pytest.mark.parametrize("pattern", ARITHMETIC_PATTERNS[::4], ids=lambda p: p.name)
def test_arithmetic_pattern_matches_eager_through_the_fusion_pass(pattern: Pattern) -> None:
    check_pattern(pattern, **fused_options())
