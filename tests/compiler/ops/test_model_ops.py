"""Ops transformer models use, against eager PyTorch: embedding, dropout, triangular masks,
repeats and grouped-query attention, boolean attention masks, rotary embeddings, finfo, .to()."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import compiler
from compiler.prims import Prim

SEEDS = [0, 1, 2]


def _same(fn, *args) -> None:
    compiled, expected = compiler.jit(fn)(*args), fn(*args)
    torch.testing.assert_close(compiled, expected)


@pytest.mark.parametrize("seed", SEEDS)
def test_embedding_for_index_shapes(seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    weight = torch.randn(11, 5, generator=gen)
    for shape in [(), (1,), (7,), (2, 3), (2, 1, 4), (0, 3)]:
        indices = torch.randint(0, 11, shape, generator=gen)
        _same(lambda i, w: F.embedding(i, w), indices, weight)
    _same(lambda i, w: torch.nn.functional.embedding(i, w, padding_idx=0), torch.tensor([[0, 3]]), weight)
    with pytest.raises(TypeError, match="indices must be an integer tensor"):
        compiler.jit(lambda i, w: F.embedding(i, w))(torch.zeros(2), weight)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dropout_draws_as_eager_under_the_same_seed(seed: int, dtype: torch.dtype) -> None:
    x = torch.randn(33, 17, dtype=dtype)

    def two_dropouts(x):
        return F.dropout(x, 0.3) + F.dropout(x * 2, p=0.6)

    jitted = compiler.jit(two_dropouts)
    for _ in range(2):  # the second call reuses the entry and still draws new numbers
        torch.manual_seed(seed)
        compiled = jitted(x)
        torch.manual_seed(seed)
        torch.testing.assert_close(compiled, two_dropouts(x))
    assert compiler.cache_stats(jitted).misses == 1


def test_dropout_is_the_identity_in_eval_and_at_p_zero_and_zero_at_p_one() -> None:
    x = torch.randn(4, 4)
    assert torch.equal(compiler.jit(lambda x: F.dropout(x, 0.5, training=False))(x), x)
    assert torch.equal(compiler.jit(lambda x: F.dropout(x, 0.0))(x), x)
    torch.testing.assert_close(compiler.jit(lambda x: F.dropout(x, 1.0))(x), torch.zeros(4, 4))
    with pytest.raises(ValueError, match="p must be a number in"):
        compiler.jit(lambda x: F.dropout(x, 1.5))(x)


def test_dropout_takes_a_symbolic_p() -> None:
    """In eval mode one entry serves every p; in training each p draws as eager (p read as a value)."""
    x = torch.randn(3, 4)
    evaluating = compiler.jit(lambda t, p: F.dropout(t, p, training=False) * 2, numbers="symbolic")
    for p in (0.1, 0.2, 0.5):
        torch.testing.assert_close(evaluating(x, p), x * 2)
    assert compiler.cache_stats(evaluating).misses == 1
    with pytest.raises(ValueError, match=r"p must be a number in \[0, 1\], got 1.5"):
        evaluating(x, 1.5)
    training = compiler.jit(lambda t, p: F.dropout(t, p, training=True), numbers="symbolic")
    for p in (0.0, 0.3, 1.0):
        torch.manual_seed(0)
        got = training(x, p)
        torch.manual_seed(0)
        torch.testing.assert_close(got, F.dropout(x, p, training=True))


@pytest.mark.parametrize("diagonal", [-2, 0, 1, 5])
def test_triu_tril_masks_and_masked_fill(diagonal: int) -> None:
    for shape in [(5, 5), (3, 6), (2, 4, 3)]:
        x = torch.randn(shape)
        _same(lambda x: (torch.triu(x, diagonal), x.tril(diagonal)), x)
    size = 6

    def causal_scores(scores):
        mask = torch.triu(torch.ones(size, size, dtype=torch.bool), diagonal=1)
        filled = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
        keep = torch.arange(size)[:, None] >= torch.arange(size)[None, :]
        return filled.softmax(-1), torch.where(keep, scores, float("-inf")).softmax(-1)

    _same(causal_scores, torch.randn(2, size, size))


@pytest.mark.parametrize("seed", SEEDS)
def test_repeat_interleave_and_repeat(seed: int) -> None:
    x = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(seed))
    for dim in (0, 1, -1, None):
        _same(lambda x, dim=dim: torch.repeat_interleave(x, 3, dim=dim), x)
    _same(lambda x: (x.repeat(2, 1, 3), x.repeat(2, 2, 1, 1), x.repeat_interleave(2, 1)), x)


@pytest.mark.parametrize("seed", SEEDS)
def test_grouped_query_attention_and_boolean_masks(seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(2, 8, 5, 16, generator=gen)
    k, v = torch.randn(2, 2, 7, 16, generator=gen), torch.randn(2, 2, 7, 16, generator=gen)
    mask = torch.rand(5, 7, generator=gen) > 0.3
    mask[:, 0] = True

    def gqa(q, k, v, mask):
        expanded = k[:, :, None].expand(2, 2, 4, 7, 16).reshape(2, 8, 7, 16)
        return (
            F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True),
            F.scaled_dot_product_attention(q, expanded, v.repeat_interleave(4, dim=1), is_causal=True),
        )

    _same(gqa, q, k, v, mask)


@pytest.mark.parametrize("seed", SEEDS)
def test_rotary_embeddings_in_both_layouts(seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 4, 6, 8, generator=gen)
    positions = torch.arange(6)

    def rotary(x, positions):
        inv_freq = 1.0 / (10000 ** (torch.arange(0, 8, 2).float() / 8))
        angles = positions.float()[:, None] * inv_freq[None, :]
        cos, sin = torch.cat((angles, angles), -1).cos(), torch.cat((angles, angles), -1).sin()
        first, second = x.chunk(2, dim=-1)
        halves = x * cos + torch.cat((-second, first), dim=-1) * sin
        pairs = x.view(*x.shape[:-1], 4, 2)
        even, odd = pairs[..., 0], pairs[..., 1]
        c, s = angles.cos(), angles.sin()
        interleaved = torch.stack((even * c - odd * s, even * s + odd * c), dim=-1).flatten(-2)
        return halves.to(torch.bfloat16), interleaved.to(x.device, torch.float64)

    _same(rotary, x, positions)


def test_cross_entropy_ignores_the_ignored_targets() -> None:
    logits, targets = torch.randn(6, 10), torch.randint(0, 10, (6,))
    targets[::2] = -1
    _same(lambda a, t: F.cross_entropy(a, t, ignore_index=-1), logits, targets)
    _same(lambda a, t: F.cross_entropy(a.bfloat16(), t, ignore_index=-1, reduction="sum"), logits, targets)


def _full_rotary_with_pass_through(q: torch.Tensor, x: torch.Tensor):
    # GPT-NeoX's partial rotary when the rotary covers the whole head: the pass-through part is empty
    rot, passed = q[..., :8], q[..., 8:]
    rotated = torch.cat((-rot[..., 4:], rot[..., :4]), dim=-1) * 0.5
    return torch.cat((rotated, passed), dim=-1), torch.cat((x.int()[..., :0], q), dim=-1)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_cat_leaves_out_pieces_empty_along_its_dim_and_keeps_their_dtype(seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    q, x = torch.randn(2, 3, 8, generator=gen, requires_grad=True), torch.randn(2, 3, 8, generator=gen)
    jfn = compiler.jit(_full_rotary_with_pass_through)
    got, expected = jfn(q, x), _full_rotary_with_pass_through(q, x)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype
        torch.testing.assert_close(g, e)
    (grad,) = torch.autograd.grad(got[0].sum() + got[1].sum(), q)
    torch.testing.assert_close(grad, torch.autograd.grad(expected[0].sum() + expected[1].sum(), q)[0])
    cats = [b for b in _all_bsyms(compiler.last_traces(jfn)[-1].bsyms) if b.sym is Prim.CAT]
    assert len(cats) == 1 and all(0 not in p.shape for p in cats[0].args[0]), cats


def _all_bsyms(bsyms):
    for b in bsyms:
        yield b
        yield from _all_bsyms(b.subsymbols)
