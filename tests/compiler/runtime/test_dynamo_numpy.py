"""NumPy functions of Python numbers inside a model (CTRL scales its embeddings by `np.sqrt(d_model)`,
PEGASUS-X its positions by `np.log(...)`): dynamo records them as its NumPy wrappers; the "fusebench"
backend compiles them as constants, the graph whole (no fallback), forward and gradients as eager's."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from torch import nn

import compiler


class _ScaledByNumpy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.width = 16
        self.linear = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        y *= np.sqrt(self.width)
        return y * -(np.log(float(self.width)) / 3) + np.float32(0.5)


@pytest.mark.parametrize("seed", [0, 1])
def test_numpy_of_numbers_compiles_whole(seed: int) -> None:
    torch.manual_seed(seed)
    model = _ScaledByNumpy()
    x = torch.randn(3, 4, requires_grad=True)
    torch._dynamo.reset()
    before = compiler.examine.fallbacks_recorded()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", compiler.UnsupportedFallback)
        output = torch.compile(model, backend="fusebench")(x)
    expected = model(x)
    assert output.dtype == expected.dtype
    torch.testing.assert_close(output, expected)
    assert compiler.examine.fallbacks(since=before) == []
    got = torch.autograd.grad(output.sum(), [x, model.linear.weight])
    want = torch.autograd.grad(expected.sum(), [x, model.linear.weight])
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
