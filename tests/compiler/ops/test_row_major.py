"""Returned tensors that eager always lays out row-major are contiguous (compiler/ops/row_major.py):
`x.t().contiguous()` is a copy that executors would lay out in its operand's transposed order."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import compiler


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(
    "make",
    [
        lambda x: x.t().contiguous(),
        lambda x: x.unsqueeze(0).permute(2, 0, 1).contiguous(),  # a size-1 dim
        lambda x: x[:, ::2].contiguous(),  # strided
        lambda x: torch.softmax(x.t(), -1),  # an op eager allocates row-major
        lambda x: (x.t().contiguous(), x.sum(), [x.t().contiguous()]),
    ],
)
def test_a_returned_row_major_copy_is_contiguous_as_in_eager(make, dtype) -> None:
    for seed in range(2):
        x = torch.randn(4, 6, generator=torch.Generator().manual_seed(seed)).to(dtype)
        expected, actual = make(x), compiler.jit(make)(x)
        torch.testing.assert_close(actual, expected)
        pairs = zip(actual, expected) if isinstance(expected, tuple) else [(actual, expected)]
        for ours, eager in pairs:
            ours, eager = (ours[0], eager[0]) if isinstance(ours, list) else (ours, eager)
            assert ours.is_contiguous() == eager.is_contiguous() and ours.stride() == eager.stride()
            ours.view(-1)  # what a caller does with a contiguous tensor


def test_an_elementwise_result_keeps_its_operands_order_as_in_eager() -> None:
    x = torch.randn(4, 6)
    assert compiler.jit(lambda x: x.t() * 2)(x).stride() == (x.t() * 2).stride() == (1, 6)


def test_a_copy_whose_view_is_returned_too_still_shares_its_memory_with_it() -> None:
    def program(x):
        copy = x.t().contiguous()
        return copy, copy.unsqueeze(0)

    copy, view = compiler.jit(program)(torch.randn(4, 6))
    copy.add_(1)
    torch.testing.assert_close(view[0], copy)  # a write into one reaches the other, as in eager


def test_a_contiguous_input_comes_back_itself() -> None:
    x = torch.randn(4, 6)
    assert compiler.jit(lambda x: x.contiguous())(x) is x


def test_gradients_flow_through_a_returned_contiguous_copy() -> None:
    x = torch.randn(4, 6, requires_grad=True)
    y = compiler.jit(lambda x: (x * 3).t().contiguous())(x)
    assert y.is_contiguous() and y.requires_grad
    (y * torch.arange(24.0).view(6, 4)).sum().backward()
    torch.testing.assert_close(x.grad, 3 * torch.arange(24.0).view(6, 4).t())


def test_a_module_returning_a_transposed_copy_returns_it_contiguous() -> None:
    class Heads(nn.Module):
        def forward(self, x: torch.Tensor) -> dict:
            return {"merged": x.transpose(1, 2).contiguous(), "scale": x.sum()}

    x = torch.randn(2, 3, 5, 4)
    out = compiler.jit(Heads())(x)
    assert out["merged"].is_contiguous()
    torch.testing.assert_close(out["merged"].view(2, 5, 12), x.transpose(1, 2).reshape(2, 5, 12))
