"""A mask's additive bias is made once per mask, and made again whenever the mask changed."""

from __future__ import annotations

import gc

import torch
import torch.nn.functional as F

import compiler
from compiler.executors import attention_masks
from compiler.executors.attention_masks import additive_bias


def _mask(rows=8, columns=8, seed=0):
    return torch.rand(rows, columns, generator=torch.Generator().manual_seed(seed)) > 0.3


def _expected(mask, dtype):
    return torch.zeros(mask.shape, dtype=dtype).masked_fill(~mask, float("-inf"))


def test_a_boolean_mask_becomes_zero_or_minus_infinity_once():
    mask = _mask()
    first = additive_bias(mask, torch.bfloat16, aligned=False)
    torch.testing.assert_close(first, _expected(mask, torch.bfloat16))
    assert additive_bias(mask, torch.bfloat16, aligned=False) is first
    assert additive_bias(mask, torch.float32, aligned=False) is not first  # another dtype, another bias
    assert additive_bias(mask.clone(), torch.float32, aligned=False) is not first  # another tensor


def test_a_mask_written_in_place_is_converted_again():
    mask = _mask()
    before = additive_bias(mask, torch.float32, aligned=False)
    mask[0] = ~mask[0]
    after = additive_bias(mask, torch.float32, aligned=False)
    assert after is not before
    torch.testing.assert_close(after, _expected(mask, torch.float32))


def test_misaligned_rows_are_copied_into_aligned_ones_with_the_same_values():
    floating = torch.randn(3, 10)  # rows of 10 elements: not a multiple of 16
    bias = additive_bias(floating, torch.float32, aligned=True)
    assert all(s % attention_masks.ALIGNMENT == 0 for s in bias.stride()[:-1])
    torch.testing.assert_close(bias, floating)
    assert additive_bias(floating, torch.float32, aligned=True) is bias
    aligned = torch.randn(3, 16)
    assert additive_bias(aligned, torch.float32, aligned=True) is aligned
    assert additive_bias(floating, torch.float32, aligned=False) is floating  # the CPU kernel takes any rows
    assert additive_bias(None, torch.float32, aligned=True) is None


def test_a_freed_mask_takes_its_bias_with_it_and_few_are_remembered():
    gc.collect()
    base = attention_masks.remembered()
    mask = _mask(seed=1)
    additive_bias(mask, torch.float32, aligned=False)
    assert attention_masks.remembered() == base + 1
    del mask
    gc.collect()
    assert attention_masks.remembered() == base
    masks = [_mask(seed=s) for s in range(10)]
    for mask in masks:
        additive_bias(mask, torch.float32, aligned=False)
    assert attention_masks.remembered() <= 4


def layers(q, k, v, mask):
    for _ in range(3):
        q = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return q


def test_layers_reading_one_mask_give_eagers_result_before_and_after_it_changes():
    jfn = compiler.jit(layers)
    q, k, v = (torch.randn(2, 3, 8, 16, generator=torch.Generator().manual_seed(i)) for i in range(3))
    q.requires_grad_()
    for mask in (_mask(), torch.randn(8, 8)):
        got = jfn(q, k, v, mask)
        got.sum().backward()
        torch.testing.assert_close(got, layers(q, k, v, mask))
        mask[:, :4] = ~mask[:, :4] if mask.dtype == torch.bool else -mask[:, :4]
        torch.testing.assert_close(jfn(q, k, v, mask), layers(q, k, v, mask))
