"""An attention mask built as `key position <= query position` over a square runs as
`is_causal=True` without the mask (torch can then take FlashAttention); every other mask keeps
its own. Values and gradients as eager's."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import compiler
from compiler.prims import Prim
from tests.support.autodiff_util import check_gradients

SEEDS = [0, 1, 2]


def attention_calls(jfn) -> list[tuple]:
    """(mask, is_causal) of every attention prim in the last trace."""
    trace = compiler.last_traces(jfn)[-1]
    prims = (s for b in trace.bsyms for s in (b, *b.subsymbols))
    return [(s.args[3], s.args[4]) for s in prims if s.sym in (Prim.SDPA, Prim.SDPA_FORWARD)]


def _positions(q: torch.Tensor) -> torch.Tensor:
    return torch.arange(q.shape[-2], device=q.device)


def falcon_style(q):  # transformers' create_causal_mask: kv_idx <= cache_position, expanded over the batch
    pos = _positions(q)
    return (pos[None, :] <= pos[:, None])[None, None].expand(q.shape[0], 1, -1, -1)


def viewed_positions(q):  # cache_position.view(-1, 1) >= arange(n) + 0
    pos = _positions(q)
    return pos.view(-1, 1) >= (torch.arange(q.shape[-2]) + 0).view(1, -1)


def strict_plus_one(q):  # j < i + 1
    pos = _positions(q)
    return pos[None, :] < pos[:, None] + 1


def and_ones(q):  # BioGPT: True & causal & a padding mask of ones, gathered at the key positions
    pos = _positions(q)
    padding = torch.ones(1, q.shape[-2]).bool().reshape(-1)[pos].reshape(1, 1, 1, -1)
    return (torch.tensor(True) & (pos[None, :] <= pos[:, None]))[None, None] & padding


def one_ahead(q):  # j <= i + 1: not causal
    pos = _positions(q)
    return pos[None, :] <= pos[:, None] + 1


def sliding_window(q):  # j <= i and j > i - 2
    pos = _positions(q)
    return (pos[None, :] <= pos[:, None]) & (pos[None, :] > pos[:, None] - 2)


def and_padding(q):  # causal & a padding mask with a zero
    pos = _positions(q)
    padding = torch.ones(1, q.shape[-2])
    padding[0, -1] = 0
    return (pos[None, :] <= pos[:, None])[None, None] & padding.bool()[:, None, None, :]


def written_positions(q):  # built causal, then a position written in place: no longer causal
    pos = _positions(q)
    pos[3] = 0
    return pos[None, :] <= pos[:, None]


def upper(q):  # i <= j: the transpose
    pos = _positions(q)
    return pos[:, None] <= pos[None, :]


def attend(mask_of):
    def program(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask_of(q))

    return program


def inputs(seed, queries=8, keys=8, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(2, 3, n, 16, generator=g).to(dtype) for n in (queries, keys, keys)]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("mask_of", [falcon_style, viewed_positions, strict_plus_one, and_ones])
def test_a_mask_built_causal_runs_as_is_causal(mask_of, seed):
    program = attend(mask_of)
    jfn = compiler.jit(program)
    q, k, v = inputs(seed)
    torch.testing.assert_close(jfn(q, k, v), program(q, k, v))
    assert attention_calls(jfn) == [(None, True)]
    check_gradients(program, inputs(seed))


@pytest.mark.parametrize("mask_of", [one_ahead, sliding_window, and_padding, written_positions, upper])
def test_other_masks_keep_theirs(mask_of):
    program = attend(mask_of)
    jfn = compiler.jit(program)
    q, k, v = inputs(0)
    torch.testing.assert_close(jfn(q, k, v), program(q, k, v))
    [(mask, is_causal)] = attention_calls(jfn)
    assert mask is not None and is_causal is False


def test_a_rectangle_of_fewer_queries_keeps_its_mask():
    # a decode step's mask (bottom-right aligned); is_causal would align it top-left
    def program(q, k, v):
        rows = torch.arange(q.shape[-2]) + (k.shape[-2] - q.shape[-2])
        return F.scaled_dot_product_attention(q, k, v, attn_mask=torch.arange(k.shape[-2])[None, :] <= rows[:, None])

    jfn = compiler.jit(program)
    q, k, v = inputs(0, queries=3, keys=8)
    torch.testing.assert_close(jfn(q, k, v), program(q, k, v))
    [(mask, is_causal)] = attention_calls(jfn)
    assert mask is not None and is_causal is False


def test_a_mask_passed_in_keeps_itself():
    def program(q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    jfn = compiler.jit(program)
    q, k, v = inputs(0)
    mask = torch.ones(8, 8, dtype=torch.bool).tril()
    torch.testing.assert_close(jfn(q, k, v, mask), program(q, k, v, mask))
    [(found, is_causal)] = attention_calls(jfn)
    assert found is not None and is_causal is False
