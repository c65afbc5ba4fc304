# ruff: noqa: E501 - one case per line reads best as a table
"""A compact table of programs that, together, put every prim the nvFuser executor translates
into a fusion. Each case is a function of tensors (and numbers); its eager reference is the same
function called on real tensors (prims called directly evaluate with torch), so a case compares
nvFuser against PyTorch. Shared by the CPU tests (fake nvFuser) and the GPU tests (real nvFuser).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from compiler import prims


@dataclass(frozen=True)
class Case:
    """One program: `make(device)` returns its arguments."""

    name: str
    fn: Callable
    make: Callable[[str], tuple]
    fusion: dict = field(default_factory=dict)
    # NOTE: False where eager disagrees with the prim's meta (torch's int32 sum returns int64).
    check_dtype: bool = True


def _f(*shape: int, dtype: torch.dtype = torch.float32, low: float | None = None) -> Callable[[str], torch.Tensor]:
    def make(device: str) -> torch.Tensor:
        x = torch.randn(*shape, device=device).to(dtype)
        return x.abs() + low if low is not None else x

    return make


def _i(*shape: int, dtype: torch.dtype = torch.int64, low: int = -8, high: int = 8) -> Callable[[str], torch.Tensor]:
    return lambda device: torch.randint(low, high, shape, device=device, dtype=dtype)


def _b(*shape: int) -> Callable[[str], torch.Tensor]:
    return lambda device: torch.rand(*shape, device=device) > 0.5


def _args(*makers: Callable) -> Callable[[str], tuple]:
    return lambda device: tuple(m(device) if callable(m) else m for m in makers)


X = _f(4, 33)
Y = _f(4, 33)
POS = _f(4, 33, low=0.25)
ABOVE_ONE = _f(4, 33, low=1.0)  # acosh's domain
UNIT = lambda device: torch.rand(4, 33, device=device) * 1.98 - 0.99  # inside (-1, 1): atanh's domain

_UNARY = {
    "neg": (torch.neg, X), "abs": (torch.abs, X), "exp": (torch.exp, X), "exp2": (torch.exp2, X),
    "log": (torch.log, POS), "log1p": (torch.log1p, POS), "sqrt": (torch.sqrt, POS), "rsqrt": (torch.rsqrt, POS),
    "sin": (torch.sin, X), "cos": (torch.cos, X), "tanh": (torch.tanh, X), "erf": (torch.erf, X),
    "reciprocal": (torch.reciprocal, POS), "floor": (prims.floor, X), "ceil": (prims.ceil, X),
    "trunc": (prims.trunc, X), "sign": (prims.sign, X), "log2": (torch.log2, POS), "log10": (torch.log10, POS),
    "tan": (torch.tan, UNIT), "sinh": (torch.sinh, X), "cosh": (torch.cosh, X), "asinh": (torch.asinh, X),
    "acosh": (torch.acosh, ABOVE_ONE), "atanh": (torch.atanh, UNIT), "erfc": (torch.erfc, X),
}  # fmt: skip

CASES: list[Case] = [
    *(Case(name, fn, _args(make)) for name, (fn, make) in _UNARY.items()),
    Case("bitwise_not", torch.bitwise_not, _args(_i(4, 33))),
    Case("logical_not_bool", lambda b: prims.bitwise_not(b), _args(_b(4, 33))),
    Case("add_sub_mul_div", lambda a, b: ((a + b) * (a - b)) / (b.abs() + 1), _args(X, Y)),
    Case("scalar_first", lambda a: (1 - a) * 2.5, _args(X)),
    Case("remainder_fmod", lambda a, b: (torch.remainder(a, b), torch.fmod(a, b)), _args(X, POS)),
    Case("int_remainder", lambda a, b: torch.remainder(a, b), _args(_i(4, 33), _i(4, 33, low=1))),
    Case("int_floor_divide", lambda a, b: (a // b, torch.floor_divide(a, -b), a // 3, a // -3, 7 // b), _args(_i(4, 33, low=-50, high=50), _i(4, 33, low=1))),
    Case("int32_floor_divide", lambda a, b: (a // b, (a * 3) // -b), _args(_i(4, 33, dtype=torch.int32, low=-50, high=50), _i(4, 33, dtype=torch.int32, low=1))),
    Case("pow", lambda a, b: torch.pow(a, b) + a**3, _args(POS, Y)),
    Case("atan2_erfinv", lambda a, b: (torch.atan2(a, b), prims.atan2(a, 0.5), torch.erfinv(torch.tanh(a))), _args(X, Y)),
    Case("max_min", lambda a, b: (torch.maximum(a, b), torch.minimum(a, b)), _args(X, Y)),
    Case("comparisons", lambda a, b: (a == b, a != b, a < b, a <= b, a > b, a >= b), _args(X, _f(4, 33))),
    Case("bitwise_int", lambda a, b: (a & b, a | b, a ^ b), _args(_i(4, 33), _i(4, 33))),
    Case("bitwise_bool", lambda a, b: (a & b, a | b, a ^ b), _args(_b(4, 33), _b(4, 33))),
    Case("where_clamp", lambda a, b: (torch.where(a > 0, a, b), a.clamp(-0.5, 0.5)), _args(X, Y)),
    Case("lerp_addcmul", lambda a, b, c: (torch.lerp(a, b, c), torch.addcmul(a, b, c, value=0.5)), _args(X, Y, Y)),
    Case("masked_fill", lambda a, m: a.masked_fill(m, -1.0), _args(X, _b(4, 33))),
    Case("convert", lambda a, i: (a.to(torch.float64), a.to(torch.int64), i.to(torch.float32), a > 0), _args(X, _i(4, 33))),
    Case("bf16_chain", lambda a, b: ((a * 2 + b).sin(), a.neg(), a.float()), _args(_f(4, 33, dtype=torch.bfloat16), _f(4, 33, dtype=torch.bfloat16))),
    Case("fp16_chain", lambda a, b: (a * b + 1).tanh(), _args(_f(4, 33, dtype=torch.float16), _f(4, 33, dtype=torch.float16))),
    Case("sum_dims", lambda a: prims.sum(prims.mul(a, 2.0), (0,)), _args(_f(8, 33))),
    Case("sum_all_prod", lambda a: (prims.sum(a, (0, 1)), prims.prod(prims.mul(a, 0.5), (1,))), _args(_f(4, 5))),
    Case("amax_amin", lambda a: (prims.amax(prims.exp(a), (1,)), prims.amin(prims.neg(a), (0,))), _args(_f(8, 33))),
    Case("int32_sum", lambda a: prims.sum(prims.mul(a, 3), (1,)), _args(_i(4, 33, dtype=torch.int32)), check_dtype=False),
    Case("bf16_sum", lambda a: prims.sum(prims.convert_element_type(a, torch.float32), (1,)), _args(_f(4, 33, dtype=torch.bfloat16))),
    Case("broadcast", lambda a, b: a[None] + b, _args(_f(4, 33), _f(3, 4, 33))),
    Case("broadcast_size1", lambda a, b: a * b, _args(_f(4, 1), _f(4, 33))),
    Case("reshape_permute", lambda a: (a * 2).reshape(2, 66).t() + 1, _args(X)),
    Case("slice_squeeze", lambda a: (a[1:3, 2:20] * 2, a[0] + 1), _args(X)),
    Case("cat_stack", lambda a, b: (torch.cat([a.sin(), b], 0), torch.stack([a, b.cos()])), _args(X, Y)),
    Case("expand", lambda a: a.exp().expand(3, 4, 33) + 1, _args(X)),
    Case("index_select", lambda a, i: a.index_select(0, i) * 2, _args(X, _i(6, low=0, high=4))),
    Case("gather", lambda a, i: torch.gather(a.exp(), 1, i), _args(X, _i(4, 5, low=0, high=33))),
    Case("take_along_axis", lambda a, i: torch.gather(a, 1, i) * 2, _args(X, _i(4, 5, low=0, high=33))),
    Case("gather_smaller_index", lambda a, i: torch.gather(a, 1, i) * 2, _args(X, _i(3, 5, low=0, high=33))),
    Case("flip_roll_diff", lambda a: (a.flip(1) * 2, a.roll(3, 1) + 1, torch.diff(a.exp(), dim=1)), _args(X)),
    Case("group_norm", lambda a, w, b: F.group_norm(a * 2, 2, w, b).exp(), _args(_f(4, 6, 11), _f(6), _f(6))),
    Case("group_norm_bf16", lambda a, w, b: F.group_norm(a, 3, w, b), _args(_f(2, 6, 5, 7, dtype=torch.bfloat16), _f(6, dtype=torch.bfloat16), _f(6, dtype=torch.bfloat16))),
    Case("hypot_logit_xlogy", lambda a, b: (torch.hypot(a, b), torch.logit(a.sigmoid(), eps=1e-6), torch.xlogy(a, b.abs())), _args(X, Y)),
    Case("scatter_add_between", lambda a, i, s: torch.scatter_add(a * 2, 1, i, s.exp()).sin(), _args(X, _i(4, 5, low=0, high=33), _f(4, 5))),
    Case("clipping_activations", lambda a: (F.leaky_relu(a, 0.2), F.hardtanh(a * 3, -2.0, 2.0), F.relu6(a * 8), F.threshold(a, 0.1, -1.0)), _args(X)),
    Case("silu_inplace", lambda a: F.silu(a * 2, inplace=True) + 1, _args(X)),
    Case("topk_values", lambda a: (torch.topk(a, 3).values * 2, torch.sort(a, 0).values.exp()), _args(X)),
    Case("gather_squeeze_bf16", lambda a, i: torch.gather(a, 1, i).squeeze(1) * 2, _args(_f(4, 33, dtype=torch.bfloat16), _i(4, 1, low=0, high=33))),
    Case("gather_squeeze_bool", lambda m, i, a: torch.where(torch.gather(m, 1, i).squeeze(1), a, 0.0), _args(_b(4, 33), _i(4, 1, low=0, high=33), _f(4))),
    Case("gather_broadcast_bf16", lambda a, i, b: torch.gather(a, 1, i) * b, _args(_f(4, 33, dtype=torch.bfloat16), _i(4, 1, low=0, high=33), _f(4, 33, dtype=torch.bfloat16))),
    Case("full_ones", lambda a: a + torch.ones_like(a) * 3 + torch.full((4, 33), 2.0, device=a.device), _args(X)),
    Case("iota", lambda a: a + prims.iota(33, 0, 1, torch.float32, a.device), _args(X)),
    Case("non_contiguous_input", lambda a: a.sin() * 2, lambda d: (torch.randn(33, 4, device=d).t(),)),
    Case("matmul_fused", lambda a, b: prims.add(prims.matmul(a, b), 1.0), _args(_f(16, 32), _f(32, 16)), {"matmul": True}),
    Case("linear_fused", lambda a, w, c: prims.mul(prims.linear(a, w, c), 2.0), _args(_f(16, 32), _f(8, 32), _f(8)), {"matmul": True}),
    # a reduction's output with size-1 dims reshaped or squeezed away (DeBERTa's backward)
    Case("sum_then_unit_dims_reshaped", lambda g: g.permute(0, 2, 1).reshape(8, 12, 1, 16, 1, 64).sum(0).reshape(1, 12, 16, 64) * 2, _args(_f(96, 64, 16, dtype=torch.bfloat16))),
    Case("sum_then_unit_dims_squeezed", lambda g: g.reshape(3, 4, 1, 5).sum(0).squeeze(1).exp(), _args(_f(12, 5))),
]  # fmt: skip


def write_back(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """`old = x - y; x.mul_(2).add_(y)` as functionalization lowers it: pure math, then a write-back."""
    old = prims.sub(x, y)  # reads x before the write-back
    updated = prims.add(prims.mul(x, 2.0), y)
    prims.copy_to(updated, x)
    return old


def gelu_bias_backward(s0, s1, s2, s3, t4, t5, t6):
    """The GELU-backward math of issue 4, with the bias-gradient reduction as a prim."""
    t16 = torch.tanh(0.797885 * (t6 + 0.044715 * t6**3))
    t28 = (t5 * (0.5 * t6)) * (1 - t16 * t16) * s3
    t38 = t28 + (t28 * s2 * s1) * t6**2 + (t5 * (1 + t16)) * s0
    return prims.sum(t4, (0, 1)), t38


def split3(a, d0, d1):
    """Three slices with symbolic bounds, each with its own pointwise op."""
    d2 = a.size(2) - d0 - d1
    x, y, z = torch.split(a, (d0, d1, d2), dim=2)
    return x * 2, y + 1, z.sin()


def tolerance(dtype: torch.dtype) -> dict:
    """assert_close tolerances for nvFuser vs eager (fp32 math reordered; bf16/fp16 rounded once)."""
    return {
        torch.bfloat16: {"rtol": 2e-2, "atol": 2e-2},
        torch.float16: {"rtol": 1e-2, "atol": 1e-2},
        torch.float32: {"rtol": 1e-4, "atol": 1e-4},
    }.get(dtype, {"rtol": 1e-7, "atol": 1e-7})


def flat(value: object) -> list:
    """The tensors of a (nested) result, in order."""
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in flat(v)]
    return [value]


def qk_norm_rotary(
    q: torch.Tensor, k: torch.Tensor, inv_freq: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor
) -> tuple:
    """Qwen3's attention input ([batch, seq, heads, dim] q and k): an RMSNorm over each head,
    heads moved forward, the rotary embedding with cos/sin from the positions and a cat of the
    frequencies (as transformers computes them)."""

    def rms(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))

    def rotate_half(x: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    positions = torch.arange(q.shape[1], device=q.device)[None, :, None].float()
    freqs = positions * inv_freq[None, None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[:, None], emb.sin()[:, None]
    q, k = rms(q, wq).transpose(1, 2), rms(k, wk).transpose(1, 2)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def alibi_scores_softmax(slopes, scores):
    """Bloom's attention: the alibi `slopes * arange(n)` repeated over the batch and merged to
    [b * h, 1, n], added to the scores, split back to [b, h, 1, n] for the softmax."""
    bh, _, n = scores.shape
    h = slopes.shape[0]
    alibi = (slopes[:, None, None] * torch.arange(n, device=scores.device)[None, None, :]).to(scores.dtype)
    alibi = alibi[None].expand(bh // h, h, 1, n).reshape(bh, 1, n)
    x = (scores.float() * 0.125 + alibi.float()).to(scores.dtype).reshape(bh // h, h, 1, n)
    return alibi, torch.softmax(x.float(), -1).to(scores.dtype)


def multi_query_heads(qkv, cos, sin):
    """Falcon's attention inputs: the query heads, and the one key and one value head a list index
    picks from the fused projection (`qkv[:, :, [-2]]`); rotated, the key and value expanded over
    the query heads (the value scaled, as attention reads it: a returned pick is eager's own memory)."""
    heads, half = qkv.shape[2] - 2, qkv.shape[3] // 2

    def rotary(x):
        return x * cos + torch.cat((-x[..., half:], x[..., :half]), -1) * sin

    q, k, v = (t.transpose(1, 2) for t in (qkv[:, :, :-2], qkv[:, :, [-2]], qkv[:, :, [-1]]))
    return rotary(q), rotary(k).expand(-1, heads, -1, -1), v.expand(-1, heads, -1, -1) * 2
