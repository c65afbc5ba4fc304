"""`model.forward = compiler.jit(model.forward)`: the bound forward jitted with its module (its
parameters are inputs, not baked-in attributes), the class's forward inside, the signature kept."""

from __future__ import annotations

import inspect

import torch
from torch import nn

import compiler


class Scaled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 5)

    def forward(self, x: torch.Tensor, scale: float = 2.0) -> torch.Tensor:
        return torch.relu(self.linear(x)) * scale


def test_a_jitted_bound_forward_replaces_the_forward_and_matches_eager() -> None:
    torch.manual_seed(0)
    model, reference = Scaled(), Scaled()
    reference.load_state_dict(model.state_dict())
    model.forward = compiler.jit(model.forward)
    assert list(inspect.signature(model.forward).parameters)[-2:] == ["x", "scale"]
    x = torch.randn(3, 4)
    out, expected = model(x, scale=3.0), reference(x, scale=3.0)
    torch.testing.assert_close(out, expected)
    out.sum().backward(), expected.sum().backward()
    torch.testing.assert_close(model.linear.weight.grad, reference.linear.weight.grad)
    assert compiler.cache_stats(model.forward).misses == 1
    assert "prims.linear" in str(compiler.last_traces(model.forward)[-1])
    with torch.no_grad():  # the parameters are read at every call: an update is seen
        model.linear.bias.add_(1.0), reference.linear.bias.add_(1.0)
    torch.testing.assert_close(model(x), reference(x))
