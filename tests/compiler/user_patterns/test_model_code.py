"""Pieces of model code users write around the suite patterns: top-k routing of experts, losses
written by hand and through `F` with their options, one-hot and argmax, integer arithmetic on
positions, bool-mask statistics, jitted against eager: tests/support/user_patterns.py."""

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
TARGET = Arg(("B",), kind="long:D")
F32 = (torch.float32,)
ROUTE = ({"B": 3, "N": 5, "D": 6, "K": 2}, {"B": 1, "N": 1, "D": 4, "K": 1}, {"B": 2, "N": 7, "D": 5, "K": 3})


def topk_softmax_routing(logits):
    weights, experts = torch.topk(logits.float(), k=2, dim=-1)
    weights = weights.softmax(-1).to(logits.dtype)
    return weights, experts


def topk_route_and_scatter(logits):
    probs = logits.softmax(-1, dtype=torch.float32)
    top, idx = probs.topk(2, dim=-1)
    top = top / top.sum(-1, keepdim=True)
    dense = torch.zeros_like(probs).scatter(-1, idx, top)
    return dense.to(logits.dtype), F.one_hot(idx, logits.shape[-1]).sum(1)


def gather_routing_weights(logits, x):
    probs = logits.softmax(-1)
    idx = probs.argmax(-1, keepdim=True)
    return probs.gather(-1, idx) * x, torch.take_along_dim(probs, idx, -1).squeeze(-1)


def expert_load_balancing(logits):
    probs = logits.float().softmax(-1)
    chosen = F.one_hot(probs.argmax(-1), probs.shape[-1]).float()
    return (chosen.mean(0) * probs.mean(0)).sum() * probs.shape[-1]


def argmax_one_hot_accuracy(logits, target):
    pred = logits.argmax(dim=-1)
    correct = (pred == target).float().mean()
    return correct, F.one_hot(pred, num_classes=logits.shape[-1]).to(logits.dtype) * logits


def cross_entropy_by_hand(logits, target):
    logp = F.log_softmax(logits.float(), dim=-1)
    return -logp.gather(1, target.unsqueeze(1)).squeeze(1).mean()


def cross_entropy_options(logits, target):
    return (
        F.cross_entropy(logits.float(), target, ignore_index=-100, reduction="sum"),
        F.cross_entropy(logits, target, reduction="none").to(torch.float32),
        F.cross_entropy(logits.float(), target, label_smoothing=0.05),
    )


def cross_entropy_ignore_index_masked(logits, target):
    labels = target.masked_fill(target == 0, -100)
    loss = F.cross_entropy(logits.float(), labels, ignore_index=-100, reduction="sum")
    return loss / (labels != -100).sum().clamp(min=1)


def cross_entropy_3d_transposed(logits3, target):
    return F.cross_entropy(logits3.transpose(1, 2).float(), target)


def nll_with_weights(logits, target, w):
    return F.nll_loss(logits.log_softmax(-1), target, weight=w.abs() + 0.5), F.nll_loss(logits.float(), target)


def label_smoothing_by_hand(logits, target):
    logp = logits.float().log_softmax(-1)
    nll = -logp.gather(-1, target[:, None]).squeeze(-1)
    smooth = -logp.mean(-1)
    return (0.9 * nll + 0.1 * smooth).mean()


def mse_and_l1_variants(x, y):
    return (
        F.mse_loss(x, y),
        F.mse_loss(x.float(), y.float(), reduction="sum"),
        F.l1_loss(x, y, reduction="none"),
        ((x - y) ** 2).mean(),
        F.smooth_l1_loss(x, y, beta=0.5),
        F.huber_loss(x, y, delta=0.5),
    )


def bce_with_logits_pos_weight(x, y, w):
    target = (y > 0).to(x.dtype)
    return (
        F.binary_cross_entropy_with_logits(x, target, pos_weight=w.abs() + 0.5),
        F.binary_cross_entropy_with_logits(x.float(), target.float(), reduction="sum"),
        F.binary_cross_entropy(torch.sigmoid(x.float()), target.float()),
    )


def kl_div_distillation(student, teacher):
    t = 2.0
    soft = F.log_softmax(student.float() / t, dim=-1)
    target = F.softmax(teacher.float() / t, dim=-1)
    return F.kl_div(soft, target, reduction="batchmean") * t * t, F.kl_div(soft, target.log(), log_target=True)


def cosine_and_margin(x, y):
    cos = F.cosine_similarity(x, y, dim=-1)
    return cos, (1 - cos).clamp(min=0).mean(), F.pairwise_distance(x, y)


def integer_floor_div_and_mod(i):
    return (
        i // 4,
        i % 3,
        torch.div(i, 4, rounding_mode="floor"),
        torch.div(i, 4, rounding_mode="trunc"),
        torch.div(i, 4),
        (i - 7) // 2,
        (i - 7) % 3,
    )


def positions_from_mask(m):
    positions = m.long().cumsum(-1) - 1
    positions = positions.masked_fill(~m, 1)
    return positions, m.sum(-1), m.int().argmax(-1), torch.cumsum(m, dim=-1, dtype=torch.int32)


def bool_arithmetic_stats(x, m):
    return m.sum(), m.float().mean(), (m * x).sum() / m.sum().clamp(min=1), m.any(), (~m).sum(-1), m.to(x.dtype) @ x.T


def where_and_masked_mean(x, m):
    return torch.where(m, x, 0.0).sum(-1) / m.sum(-1).clamp(min=1), torch.where(m, x, x.new_zeros(())).amax(-1)


def clamp_tensor_bounds(x, w):
    return x.clamp(min=w), x.clamp(max=w * 0.5), torch.clamp(x, min=-w.abs(), max=w.abs()), x.clamp_min(0.1)


def normalize_and_vector_norms(x):
    return (
        F.normalize(x, p=2, dim=-1),
        F.normalize(x.float(), dim=0).to(x.dtype),
        torch.norm(x, dim=-1),
        torch.linalg.vector_norm(x, ord=float("inf"), dim=-1),
        torch.linalg.vector_norm(x.float(), dim=(0, 1)),
        x.norm(p=1, dim=0, keepdim=True),
    )


def rsqrt_scaling(x):
    var = x.pow(2).mean(-1, keepdim=True)
    return x * torch.rsqrt(var + 1e-5), x * (var + 1e-5).rsqrt(), x / (var + 1e-5).sqrt()


def python_scalar_tensors(x):
    half = torch.tensor(0.5, device=x.device)
    three = torch.tensor(3, device=x.device)
    return x * half, x * three, half * x.sum(), x + torch.tensor(1.0, dtype=torch.float64, device=x.device)


def gumbel_free_sampling_stats(logits):
    probs = logits.float().softmax(-1)
    entropy = -(probs * probs.clamp_min(1e-12).log()).sum(-1)
    return entropy, probs.max(-1).values, probs.argmax(-1), logits.logsumexp(-1) - logits.max(-1).values


def temperature_top_p_mask(logits):
    sorted_logits, order = torch.sort(logits.float() / 0.7, descending=True, dim=-1)
    cumulative = sorted_logits.softmax(-1).cumsum(-1)
    remove = cumulative > 0.9
    remove[..., 1:] = remove[..., :-1].clone()
    remove[..., 0] = False
    filtered = sorted_logits.masked_fill(remove, float("-inf"))
    return torch.empty_like(filtered).scatter_(-1, order, filtered)


def swiglu_mlp_with_casts(x, w):
    gate, up = (x[..., None] * w).chunk(2, dim=-1)
    return (F.silu(gate.float()) * up.float()).to(x.dtype).sum(-1)


def dropout_off_in_eval(x):
    return F.dropout(x, p=0.1, training=False) * 2, F.dropout(x.float(), 0.5, False).to(x.dtype)


def kv_append_and_attend(cache, new, pos):
    n = new.shape[1]
    cache[:, pos : pos + n] = new.to(cache.dtype)
    k = cache[:, : pos + n]
    s = (new @ k.transpose(1, 2)).float() / math.sqrt(new.shape[-1])
    return s.softmax(-1).to(new.dtype) @ k


def rotary_in_place_halves(x3, w):
    h = x3.clone()
    d = h.shape[-1] // 2
    x1, x2 = h[..., :d].clone(), h[..., d:].clone()
    h[..., :d] = x1 * w[:d].cos() - x2 * w[:d].sin()
    h[..., d:] = x2 * w[:d].cos() + x1 * w[:d].sin()
    return h


def lora_with_casts(x3, w):
    a = (w[:, None] * w[None, :2]).float()
    b = (w[None, :2].T * w[None, :]).float()
    return x3 + (x3.float() @ a @ b * 0.5).to(x3.dtype)


def layer_scale_residual(x3, w):
    h = F.layer_norm(x3.float(), x3.shape[-1:]).type_as(x3)
    return x3 + w * F.gelu(h)


def partial_rotary(x3, w):
    rot, passthrough = x3[..., : x3.shape[-1] // 2], x3[..., x3.shape[-1] // 2 :]
    r1, r2 = rot.chunk(2, -1)
    rotated = torch.cat((-r2, r1), -1) * w[: rot.shape[-1]].sin() + rot * w[: rot.shape[-1]].cos()
    return torch.cat((rotated, passthrough), -1)


def scores_in_place_mask_and_scale(x3):
    s = x3 @ x3.transpose(-1, -2)
    s.div_(math.sqrt(x3.shape[-1]))
    s.masked_fill_(torch.ones_like(s, dtype=torch.bool).triu(1), float("-inf"))
    return s.softmax(-1)


def running_stats(x3, mean_buf, var_buf):
    m = x3.float().mean((0, 1))
    v = x3.float().var((0, 1), unbiased=False)
    mean_buf.mul_(0.9).add_(m.to(mean_buf.dtype), alpha=0.1)
    var_buf.lerp_(v.to(var_buf.dtype), 0.1)
    return (x3 - m.to(x3.dtype)) * torch.rsqrt(v.to(x3.dtype) + 1e-5)


EVEN = ({"B": 2, "N": 4, "D": 8, "K": 6}, {"B": 1, "N": 1, "D": 4, "K": 3}, {"B": 3, "N": 2, "D": 6, "K": 5})
MODEL_PATTERNS = [
    Pattern(topk_softmax_routing, (X,)),
    Pattern(topk_route_and_scatter, (X,), dtypes=F32),
    Pattern(gather_routing_weights, (X, Arg(("B", "K")))),
    Pattern(expert_load_balancing, (X,), dtypes=F32),
    Pattern(argmax_one_hot_accuracy, (X, TARGET), dtypes=F32),
    Pattern(cross_entropy_by_hand, (X, TARGET)),
    Pattern(cross_entropy_options, (X, TARGET)),
    Pattern(cross_entropy_ignore_index_masked, (X, TARGET)),
    Pattern(cross_entropy_3d_transposed, (X3, Arg(("B", "N"), kind="long:D"))),
    Pattern(nll_with_weights, (X, TARGET, W)),
    Pattern(label_smoothing_by_hand, (X, TARGET)),
    Pattern(mse_and_l1_variants, (X, Y)),
    Pattern(bce_with_logits_pos_weight, (X, Y, Arg(("D",), grad=False))),  # eager: pos_weight takes no gradient
    Pattern(kl_div_distillation, (X, Y)),
    Pattern(cosine_and_margin, (X, Y)),
    Pattern(integer_floor_div_and_mod, (Arg(("B", "D"), kind="long:20"),), dtypes=F32),
    Pattern(positions_from_mask, (Arg(("B", "D"), kind="mask"),), dtypes=F32),
    Pattern(bool_arithmetic_stats, (X, Arg(("B", "D"), kind="bool"))),
    Pattern(where_and_masked_mean, (X, Arg(("B", "D"), kind="mask"))),
    Pattern(clamp_tensor_bounds, (X, W)),
    Pattern(normalize_and_vector_norms, (X,)),
    Pattern(rsqrt_scaling, (X3,)),
    Pattern(python_scalar_tensors, (X,)),
    Pattern(gumbel_free_sampling_stats, (X,), dtypes=F32),
    Pattern(temperature_top_p_mask, (X,), dtypes=F32, grad=False),
    Pattern(swiglu_mlp_with_casts, (X, Arg(("K",))), sizes=ROUTE[:1]),
    Pattern(dropout_off_in_eval, (X,)),
    Pattern(
        kv_append_and_attend,
        (Arg(("B", "K", "D"), written=True), Arg(("B", "N", "D"), grad=False), 1),
        sizes=EVEN,
        grad=False,
    ),
    Pattern(rotary_in_place_halves, (X3, W), sizes=EVEN),
    Pattern(lora_with_casts, (X3, W), sizes=EVEN),
    Pattern(layer_scale_residual, (X3, W)),
    Pattern(partial_rotary, (X3, W), sizes=EVEN),
    Pattern(scores_in_place_mask_and_scale, (X3,)),
    Pattern(running_stats, (X3, Arg(("D",), written=True), Arg(("D",), kind="pos", written=True))),
]


@pytest.mark.parametrize("pattern", MODEL_PATTERNS, ids=lambda p: p.name)
def test_model_code_pattern_matches_eager(pattern: Pattern) -> None:
    check_pattern(pattern)


@pytest.mark.parametrize("pattern", MODEL_PATTERNS[::3], ids=lambda p: p.name)
def test_model_code_pattern_matches_eager_through_the_fusion_pass(pattern: Pattern) -> None:
    check_pattern(pattern, **fused_options())
