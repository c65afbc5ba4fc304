"""Gradients of jitted programs against eager autograd: every input, several seeds and shapes, f32 and bf16."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests.support.autodiff_util import check_gradients

DTYPES = [torch.float32, torch.bfloat16]
SHAPES = [(3, 5), (2, 4, 16)]


def randn(*shape, dtype=torch.float32, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def gelu_tanh(x):
    return F.gelu(x, approximate="tanh")


def gelu_erf(x):
    return F.gelu(x)


def gelu_bias(x, b):
    return F.gelu(x + b, approximate="tanh")


def swiglu(a, b):
    return F.silu(a) * b


def mlp(x, w1, b1, w2, b2):
    return F.linear(F.gelu(F.linear(x, w1, b1), approximate="tanh"), w2, b2)


def layer_norm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b)


def rms_norm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def softmax(x):
    return torch.softmax(x, -1)


def log_softmax(x):
    return torch.log_softmax(x, dim=-1)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("fn", [gelu_tanh, gelu_erf, softmax, log_softmax], ids=lambda f: f.__name__)
def test_unary_programs(fn, shape, dtype):
    for seed in range(2):
        check_gradients(fn, [randn(*shape, dtype=dtype, seed=seed)], seed=seed)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_gelu_bias_swiglu_rms_norm_and_layer_norm(shape, dtype):
    d = shape[-1]
    for seed in range(2):
        x, y = randn(*shape, dtype=dtype, seed=seed), randn(*shape, dtype=dtype, seed=seed + 10)
        w, b = randn(d, dtype=dtype, seed=seed + 20), randn(d, dtype=dtype, seed=seed + 30)
        check_gradients(gelu_bias, [x, b], seed=seed)
        check_gradients(swiglu, [x, y], seed=seed)
        check_gradients(rms_norm, [x, w], seed=seed)
        check_gradients(layer_norm, [x, w, b], seed=seed)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_linear_bias_gelu_linear(dtype):
    for seed, (rows, d, hidden) in enumerate([(4, 8, 16), (6, 16, 12)]):
        args = [
            randn(2, rows, d, dtype=dtype, seed=seed),
            randn(hidden, d, dtype=dtype, seed=seed + 1) / d**0.5,
            randn(hidden, dtype=dtype, seed=seed + 2),
            randn(d, hidden, dtype=dtype, seed=seed + 3) / hidden**0.5,
            randn(d, dtype=dtype, seed=seed + 4),
        ]
        check_gradients(mlp, args, seed=seed)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cross_entropy_with_ignore_index(dtype):
    def loss(logits, target):
        return F.cross_entropy(logits, target, ignore_index=-100)

    for seed, (n, classes) in enumerate([(6, 5), (16, 33)]):
        target = torch.randint(0, classes, (n,), generator=torch.Generator().manual_seed(seed))
        target[::3] = -100
        check_gradients(loss, [randn(n, classes, dtype=dtype, seed=seed), target], seed=seed)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_sdpa_causal_and_with_a_float_mask(dtype):
    def causal(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def masked(q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    for seed in range(2):
        q, k, v = (randn(2, 3, 8, 16, dtype=dtype, seed=seed + i) for i in range(3))
        mask = randn(8, 8, dtype=dtype, seed=seed + 5)
        check_gradients(causal, [q, k, v], seed=seed)
        check_gradients(masked, [q, k, v, mask], [True, True, True, False], seed=seed)


def reductions(x, y, z):
    return (x * y.sum(0, keepdim=True) + z.amax(-1, keepdim=True)).mean(1), (x * z).sum(), x.prod(-1)


def views(a, b):
    t = a.transpose(0, 1).reshape(a.shape[1], -1)
    first, second = torch.split(b, [2, b.shape[1] - 2], dim=1)
    c = torch.cat([first * 2, second.sin(), t], dim=1)
    return c.unsqueeze(0).expand(3, *c.shape).sum(0), a[1:, ::2].exp()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_reductions_with_broadcasting_and_views(dtype):
    for seed in range(3):
        x, y, z = (randn(4, 6, dtype=dtype, seed=seed + i) for i in range(3))
        check_gradients(reductions, [x, y, z], seed=seed)
        check_gradients(views, [randn(4, 5, dtype=dtype, seed=seed), randn(5, 5, dtype=dtype, seed=seed + 1)])


def test_programs_where_only_some_inputs_require_grad():
    x, w, b = randn(4, 8), randn(8), randn(8, seed=1)
    for flags in ([True, False, False], [False, True, False], [False, False, True], [True, False, True]):
        check_gradients(layer_norm, [x, w, b], flags)
    # an input that requires grad but reaches no output gets no gradient, as in eager
    check_gradients(lambda x, y: x * 2, [x, randn(3)], [True, True])
    # an input reached only through a zero-gradient prim gets zeros
    check_gradients(lambda x, y: x.floor() + y, [x, randn(4, 8, seed=3)], [True, True])


def test_outputs_that_carry_no_gradient_come_back_as_they_are():
    def program(x, y):
        return x * 2, x.argmax(-1), (y + 1), x.shape[0] * 3

    x, y = randn(3, 4), randn(3, 4, seed=1)
    check_gradients(program, [x, y], [True, False])


def test_in_place_updates_of_intermediates_are_differentiated():
    def program(x, w):
        h = x * w
        h.mul_(2).add_(x)
        h[:, 0] = 0.0
        return h.tanh()

    check_gradients(program, [randn(3, 4), randn(3, 4, seed=1)])


def test_a_written_input_that_does_not_require_grad_is_updated():
    def program(x, buffer):
        buffer.mul_(0.9).add_(x * 0.1)
        return (x * buffer).sum()

    x, buffer = randn(5), randn(5, seed=1)
    check_gradients(program, [x, buffer.clone()], [True, False])


def test_prod_with_zeros_uses_eagers_formula():
    for seed in range(3):
        x = randn(5, 6, seed=seed)
        x[0, 1] = 0.0  # one zero in row 0
        x[1, 2] = x[1, 4] = 0.0  # two in row 1
        x[2, :] = 0.0
        x[:, 5] = torch.where(torch.arange(5) == 3, 0.0, x[:, 5])
        check_gradients(lambda t: (t.prod(-1), t.prod(0, keepdim=True)), [x], seed=seed)
        check_gradients(lambda t: t.prod(), [x], seed=seed)


def test_relu_at_exactly_zero_has_a_zero_gradient_as_in_eager():
    x = torch.tensor([[-1.5, 0.0, 2.0, 0.0], [0.0, -0.0, 3.0, -2.0]])
    check_gradients(torch.relu, [x])
    check_gradients(lambda t: F.relu(t * 2.0) + t, [x])


def test_slices_that_do_not_tile_their_input():
    def gaps_and_overlaps(a):
        return a[:, 1:3] * 2, a[:, 2:5].sin(), a[:, ::3].exp(), a[1:2, -1:]

    for seed in range(2):
        check_gradients(gaps_and_overlaps, [randn(3, 7, seed=seed)], seed=seed)
        check_gradients(lambda a: torch.split(a, [2, 3, 2], dim=1)[1].cos(), [randn(3, 7, seed=seed)], seed=seed)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cumsum_gradients_run_the_sums_the_other_way(dtype):
    for seed in range(3):
        x = randn(4, 6, 5, dtype=dtype, seed=seed)
        check_gradients(lambda t: (t.cumsum(1) * t).sum(-1), [x], seed=seed)
        check_gradients(lambda t: torch.cumsum(t.transpose(0, 2), -1).exp(), [x], seed=seed)
        check_gradients(lambda t: t[:, :1].cumsum(1) + t.cumsum(0), [x], seed=seed)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_sort_and_topk_gradients_reach_the_elements_they_picked(dtype):
    for seed in range(3):
        x = randn(4, 6, 5, dtype=dtype, seed=seed)
        check_gradients(lambda t: torch.sort(t, dim=1, descending=True).values * t, [x], seed=seed)
        check_gradients(lambda t: t.topk(2, dim=-1).values.exp(), [x], seed=seed)
        check_gradients(lambda t: t.transpose(0, 2).topk(3, dim=0, largest=False)[0].cos(), [x], seed=seed)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cumprod_gradients_with_and_without_zeros(dtype):
    # NOTE: before a slice's first zero, at it, and after it (the rule's three cases), also with
    # two zeros in a slice; a rule dividing by the input everywhere gives NaN or inf there.
    for seed in range(3):
        x = randn(4, 6, 5, dtype=dtype, seed=seed)
        check_gradients(lambda t: (t.cumprod(1) * t).sum(-1), [x], seed=seed)
        holes = x.clone()
        holes[0, 2, :] = holes[1, 0, 1] = holes[2, 3, 4] = holes[2, 5, 4] = 0.0
        check_gradients(lambda t: t.cumprod(1).sin(), [holes], seed=seed)
        check_gradients(lambda t: torch.cumprod(t.transpose(0, 2), -1) * 2, [holes], seed=seed)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rearrangement_and_product_gradients(dtype):
    # flip (index_select), roll (slices joined), tile (repeat), diff (slices subtracted), outer
    for seed in range(3):
        x = randn(4, 6, 5, dtype=dtype, seed=seed)
        check_gradients(lambda t: t.flip(0, 2) * t, [x], seed=seed)
        check_gradients(lambda t: torch.roll(t, (2, -1), (1, 2)).sin() + t.roll(3), [x], seed=seed)
        check_gradients(lambda t: t.tile(2, 1).cos(), [x], seed=seed)
        check_gradients(lambda t: torch.diff(t, n=2, dim=1, prepend=t[:, :1] * 2).exp(), [x], seed=seed)
        check_gradients(lambda a, b: torch.outer(a, b).tanh(), [x[0, 0], x[1, :, 0]], seed=seed)


def repeat_kv(k):
    # transformers' repeat_kv: each key/value head unsqueezed, expanded for its group, flattened
    b, heads, s, d = k.shape
    return k[:, :, None, :, :].expand(b, heads, 3, s, d).reshape(b, heads * 3, s, d) * 2


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_the_gradient_of_an_unsqueeze_then_expand_sums_once(dtype):
    import compiler

    for seed in range(3):
        jfn = check_gradients(repeat_kv, [randn(2, 2, 5, 4, dtype=dtype, seed=seed)], seed=seed)
    backward = compiler.last_backward_traces(jfn, ran=True)[-1]
    sums = [b for b in backward.bsyms if b.sym.value == "sum"]
    assert [tuple(b.args[1]) for b in sums] == [(2,)], str(backward)  # not also a sum over the unsqueezed dim
