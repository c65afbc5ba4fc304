"""A cast or a view added to a pattern must not change how it is fused: each variant below (the
same work written with `.float()` first, `.to(dtype)` back, `type_as`, `dtype=` kwargs, views and
reshapes around it) compiles, forward and backward, to as many fusion regions as the pattern as
written, with the same tensor prims left outside them (each its own kernel), and matches eager.

The fusion planner of the GPU path runs on the CPU with torch running each region
(`planner_options`); on a GPU (FUSEBENCH_PATTERNS_DEVICE=cuda) the regions are nvFuser's."""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

from tests.support.user_patterns import Arg, Pattern, Structure, check_pattern, fused_options, structure

EPS = 1e-6
SIZES = ({"B": 2, "N": 8, "D": 16, "H": 32, "K": 4}, {"B": 1, "N": 1, "D": 4, "H": 8, "K": 1})
X3 = Arg(("B", "N", "D"))
X4 = Arg(("B", "K", "N", "D"))
W = Arg(("D",))
W_UP = Arg(("H", "D"))
W_DOWN = Arg(("D", "H"))
TARGETS = Arg(("B", "N"), kind="long:D")
KEYS_MASK = Arg(("B", "N"), kind="mask")


def _rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


# --- RMSNorm ----------------------------------------------------------------------------------


def rms_norm(x, w):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS))


def rms_norm_llama(x, w):
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS)
    return w * h.to(x.dtype)


def rms_norm_float_type_as(x, w):
    h = x.float()
    return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS)).type_as(x) * w


def rms_norm_rows_view(x, w):
    h = x.view(-1, x.size(-1))
    return (w * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS))).view(x.shape)


def rms_norm_variance_in_float(x, w):
    variance = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
    return w * (x * torch.rsqrt(variance + EPS)).to(w.dtype)


# --- softmax and its relatives ----------------------------------------------------------------


def softmax(x):
    return x.softmax(-1)


def softmax_float_back(x):
    return x.float().softmax(-1).to(x.dtype)


def softmax_dtype_kwarg(x):
    return F.softmax(x, dim=-1, dtype=torch.float32).type_as(x)


def softmax_rows_view(x):
    return torch.softmax(x.reshape(-1, x.shape[-1]), -1).view_as(x)


def softmax_transposed_twice(x):
    return x.transpose(0, 1).softmax(-1).transpose(0, 1)


# --- the language-model loss ------------------------------------------------------------------


def lm_loss(h, w_up, t):
    return F.cross_entropy(F.linear(h, w_up).view(-1, w_up.shape[0]), (t * 2).view(-1))


def lm_loss_float_logits(h, w_up, t):
    logits = F.linear(h, w_up).float()
    return F.cross_entropy(logits.view(-1, logits.shape[-1]), (t * 2).view(-1), ignore_index=-100)


def lm_loss_log_softmax_nll(h, w_up, t):
    logp = F.linear(h, w_up).float().log_softmax(-1)
    return F.nll_loss(logp.flatten(0, 1), (t * 2).flatten())


def lm_loss_classes_second(h, w_up, t):
    return F.cross_entropy(F.linear(h, w_up).float().transpose(1, 2), t * 2)


def lm_loss_gather_by_hand(h, w_up, t):
    logp = F.linear(h, w_up).reshape(-1, w_up.shape[0]).float().log_softmax(-1)
    return -logp.gather(1, (t * 2).reshape(-1, 1)).mean()


# --- attention with a key mask ----------------------------------------------------------------


def attention(q, k, m):
    s = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5
    s = s.masked_fill(~m[:, None, None, :], float("-inf"))
    return s.softmax(-1) @ k


def attention_finfo_float_softmax(q, k, m):
    s = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(q.size(-1))
    s = s.masked_fill(~m[:, None, None, :], torch.finfo(s.dtype).min)
    return F.softmax(s, dim=-1, dtype=torch.float32).to(q.dtype) @ k


def attention_where_type_as(q, k, m):
    s = q @ k.mT * q.shape[-1] ** -0.5
    s = torch.where(m[:, None, None, :], s, torch.finfo(s.dtype).min)
    return s.float().softmax(-1).type_as(q) @ k


def attention_additive_mask(q, k, m):
    bias = (1.0 - m[:, None, None, :].to(q.dtype)) * torch.finfo(q.dtype).min
    s = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5 + bias
    return torch.softmax(s.float(), -1).to(q.dtype) @ k


def attention_einsum(q, k, m):
    s = torch.einsum("bhqd,bhkd->bhqk", q, k) * q.shape[-1] ** -0.5
    s = s.masked_fill(~m[:, None, None, :], float("-inf"))
    return torch.einsum("bhqk,bhkd->bhqd", s.softmax(-1), k)


# --- a LLaMA-style block ------------------------------------------------------------------------


def block(x, w, w_up, w_down):
    h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w
    gate, up = F.linear(h, w_up).chunk(2, -1)
    return x + F.linear(torch.cat([F.silu(gate) * up, up], -1), w_down)


def block_llama_casts(x, w, w_up, w_down):
    hf = x.float()
    h = w * (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + EPS)).to(x.dtype)
    gate, up = F.linear(h, w_up).chunk(2, -1)
    act = (F.silu(gate.float()) * up.float()).to(up.dtype)
    return x + F.linear(torch.cat([act, up], -1), w_down)


def block_rows_view(x, w, w_up, w_down):
    rows = x.view(-1, x.size(-1))
    h = rows * torch.rsqrt(rows.pow(2).mean(-1, keepdim=True) + EPS) * w
    gate, up = F.linear(h, w_up).view(*x.shape[:-1], -1).chunk(2, -1)
    return x + F.linear(torch.cat([F.silu(gate) * up, up], -1), w_down)


def block_float_residual(x, w, w_up, w_down):
    h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w
    gate, up = F.linear(h, w_up).chunk(2, -1)
    return (x.float() + F.linear(torch.cat([F.silu(gate) * up, up], -1), w_down).float()).to(x.dtype)


# --- rotary embedding ---------------------------------------------------------------------------


def rotary(q, cos):
    return q * cos.cos() + _rotate_half(q) * cos.sin()


def rotary_float_type_as(q, cos):
    qf = q.float()
    return (qf * cos.cos().float() + _rotate_half(qf) * cos.sin().float()).type_as(q)


def rotary_unsqueezed_tables(q, cos):
    c, s = cos.cos().unsqueeze(0).unsqueeze(0), cos.sin()[None, None]
    return (q * c.to(q.dtype)) + (_rotate_half(q) * s.to(dtype=q.dtype))


# --- residual add and norm ----------------------------------------------------------------------


def residual_norm(x, y, w):
    h = x + y
    return h, F.layer_norm(h, (h.shape[-1],), w)


def residual_norm_float(x, y, w):
    h = x + y
    return h, F.layer_norm(h.float(), (h.shape[-1],), w.float()).to(h.dtype)


def residual_norm_viewed(x, y, w):
    h = x.view(-1, x.shape[-1]) + y.reshape(-1, y.shape[-1])
    return h.view(x.shape), F.layer_norm(h, (h.shape[-1],), w).view_as(x)


Q4 = Arg(("B", "K", "N", "D"))
GROUPS: dict[str, tuple[tuple[Callable, ...], tuple]] = {
    "rms_norm": (
        (rms_norm, rms_norm_llama, rms_norm_float_type_as, rms_norm_rows_view, rms_norm_variance_in_float),
        (X3, W),
    ),
    "softmax": ((softmax, softmax_float_back, softmax_dtype_kwarg, softmax_rows_view, softmax_transposed_twice), (X3,)),
    "lm_loss": (
        (lm_loss, lm_loss_float_logits, lm_loss_log_softmax_nll, lm_loss_classes_second, lm_loss_gather_by_hand),
        (X3, W_UP, TARGETS),
    ),
    "attention": (
        (attention, attention_finfo_float_softmax, attention_where_type_as, attention_additive_mask, attention_einsum),
        (Q4, Q4, KEYS_MASK),
    ),
    "block": ((block, block_llama_casts, block_rows_view, block_float_residual), (X3, W, W_UP, W_DOWN)),
    "rotary": ((rotary, rotary_float_type_as, rotary_unsqueezed_tables), (Q4, Arg(("N", "D")))),
    "residual_norm": ((residual_norm, residual_norm_float, residual_norm_viewed), (X3, X3, W)),
}
VARIANTS = [(group, fns[0], fn, args) for group, (fns, args) in GROUPS.items() for fn in fns[1:]]


# NOTE: a block rounds to bfloat16 where eager does not between its two matmuls, which amplify
# that rounding past the battery's tolerance: its values are compared in float32 only.
FLOAT32_ONLY = {"block"}


def _pattern(fn: Callable, args: tuple, dtypes: tuple = (torch.float32, torch.bfloat16)) -> Pattern:
    return Pattern(fn, args, dtypes=dtypes, sizes=SIZES)


# NOTE: a second call of other batch and sequence sizes makes the entry's sizes symbolic: a view's
# inferred -1 must then still be the size it stands for (`view(*x.shape[:-1], -1)` of a projection
# read as its width, not as a quotient of sizes), or a chunk's backward leaves its pieces' writes
# outside the fusion.
GROWN = (SIZES[0], {**SIZES[0], "B": 3, "N": 12})

EVERY_FUNCTION = [
    (fn, args, (torch.float32,) if group in FLOAT32_ONLY else (torch.float32, torch.bfloat16))
    for group, (fns, args) in GROUPS.items()
    for fn in fns
]


@pytest.mark.parametrize("fn, args, dtypes", EVERY_FUNCTION, ids=[v[0].__name__ for v in EVERY_FUNCTION])
def test_pattern_and_variants_match_eager(fn: Callable, args: tuple, dtypes: tuple) -> None:
    check_pattern(_pattern(fn, args, dtypes), **fused_options())


@functools.cache
def _structure(fn: Callable, args: tuple, symbolic: bool) -> Structure:
    return structure(_pattern(fn, args), sizes=GROWN if symbolic else ())


@pytest.mark.parametrize("group, plain, variant, args", VARIANTS, ids=[v[2].__name__ for v in VARIANTS])
def test_variant_keeps_the_fusion_structure_of_the_pattern_as_written(
    group: str, plain: Callable, variant: Callable, args: tuple
) -> None:
    expected = _structure(plain, args, False)
    assert expected.forward_regions >= 1, expected
    assert structure(_pattern(variant, args)) == expected, f"{group}: {plain.__name__} compiles to {expected}"


@pytest.mark.parametrize("group, plain, variant, args", VARIANTS, ids=[v[2].__name__ for v in VARIANTS])
def test_variant_keeps_the_fusion_structure_when_sizes_are_symbolic(
    group: str, plain: Callable, variant: Callable, args: tuple
) -> None:
    expected = _structure(plain, args, True)
    assert structure(_pattern(variant, args), sizes=GROWN) == expected, f"{group}: {plain.__name__}: {expected}"


# --- generated: casts and views around the inputs and the result of a pattern -----------------

BASES: dict[str, tuple[Callable, tuple]] = {
    "rms_norm": (rms_norm, (X3, W)),
    "softmax_scaled": (lambda x, w: (x * w).softmax(-1), (X3, W)),
    "log_softmax_biased": (lambda x, w: torch.log_softmax(x + w, -1), (X3, W)),
    "layer_norm": (lambda x, w: F.layer_norm(x, (x.shape[-1],), w), (X3, W)),
    "gelu_bias": (lambda x, w: F.gelu(x + w, approximate="tanh"), (X3, W)),
    "swiglu": (lambda x, y: F.silu(x) * y, (X3, X3)),
    "rotary": (rotary, (X3, W)),
    "logsumexp": (lambda x, w: (x * w).logsumexp(-1), (X3, W)),
    "var_mean": (lambda x, w: torch.var_mean(x * w, -1), (X3, W)),
    "cross_entropy": (lambda x, t: F.cross_entropy(x.reshape(-1, x.shape[-1]), t.reshape(-1)), (X3, TARGETS)),
}
INPUT_FORMS: dict[str, Callable] = {
    "float": lambda t: t.float(),
    "to_chain": lambda t: t.to(torch.float32).to(t.dtype),
    "double_back": lambda t: t.double().to(t.dtype),
    "type_as_self": lambda t: t.type_as(t),
    "view_round_trip": lambda t: t.view(-1, t.shape[-1]).view(t.shape),
    "flatten_unflatten": lambda t: t.flatten(0, -2).unflatten(0, t.shape[:-1]) if t.ndim > 1 else t,
    "transposed_twice": lambda t: t.transpose(0, -1).transpose(0, -1),
    "unsqueeze_squeeze": lambda t: t.unsqueeze(0).squeeze(0),
    "contiguous": lambda t: t.contiguous(),
    "sliced_whole": lambda t: t[..., :],
}
RESULT_FORMS: dict[str, Callable] = {
    "to_input_dtype": lambda r, dtype: r.to(dtype),
    "float": lambda r, dtype: r.float(),
    "type_bfloat16": lambda r, dtype: r.type(torch.bfloat16),
    "view_round_trip": lambda r, dtype: r.reshape(-1).view(r.shape),
    "contiguous": lambda r, dtype: r.contiguous(),
}
QUICK_FORMS = [("float", "to_input_dtype"), ("to_chain", "float"), ("view_round_trip", "contiguous")]


def _written(base: Callable, input_form: str | None, result_form: str | None) -> Callable:
    """`base` with its floating inputs through `INPUT_FORMS[input_form]` and each result through
    `RESULT_FORMS[result_form]`."""

    def fn(*args):
        dtype = args[0].dtype
        inputs = [INPUT_FORMS[input_form](a) if input_form and a.is_floating_point() else a for a in args]
        result = base(*inputs)
        if result_form is None:
            return result
        form = RESULT_FORMS[result_form]
        return tuple(form(r, dtype) for r in result) if isinstance(result, tuple) else form(result, dtype)

    fn.__name__ = fn.__qualname__ = f"{base.__name__}__{input_form}__{result_form}"
    return fn


def _check_forms(name: str, forms: list[tuple[str | None, str | None]]) -> None:
    base, args = BASES[name]
    expected = structure(_pattern(_written(base, None, None), args))
    for input_form, result_form in forms:
        pattern = _pattern(_written(base, input_form, result_form), args)
        assert structure(pattern) == expected, f"{pattern.name}: the pattern as written compiles to {expected}"


@pytest.mark.parametrize("name", BASES)
def test_casts_and_views_around_a_pattern_keep_its_fusion_structure(name: str) -> None:
    _check_forms(name, QUICK_FORMS)
    base, args = BASES[name]
    check_pattern(_pattern(_written(base, *QUICK_FORMS[0]), args), **fused_options())


@pytest.mark.slow
@pytest.mark.parametrize("name", BASES)
def test_every_cast_and_view_form_keeps_the_fusion_structure(name: str) -> None:
    _check_forms(name, list(itertools.product([None, *INPUT_FORMS], [None, *RESULT_FORMS])))
