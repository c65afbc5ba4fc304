"""F.embedding's padding_idx: the forward is unchanged and the padding row gets no gradient, as in eager."""

from __future__ import annotations

import pytest
import torch

import compiler


@pytest.mark.parametrize("padding_idx", [0, 3, -1, None])
@pytest.mark.parametrize("seed", [0, 1])
def test_the_padding_row_gets_no_gradient(padding_idx, seed):
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randn(10, 4, generator=generator, requires_grad=True)
    ids = torch.randint(0, 10, (2, 5), generator=generator)
    ids[0, 0], ids[1, 2] = 0, 9  # the padding rows of 0 and -1 are read
    grad_out = torch.randn(2, 5, 4, generator=generator)
    jfn = compiler.jit(lambda i, w: torch.nn.functional.embedding(i, w, padding_idx=padding_idx))

    expected = torch.nn.functional.embedding(ids, weight, padding_idx=padding_idx)
    (expected_grad,) = torch.autograd.grad(expected, weight, grad_out)
    actual = jfn(ids, weight)
    (actual_grad,) = torch.autograd.grad(actual, weight, grad_out)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(actual_grad, expected_grad)
    if padding_idx is not None:
        assert not actual_grad[padding_idx].any()
