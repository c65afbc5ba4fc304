"""A forward that builds a module while it runs (BigBird swaps its block-sparse attention for full
attention on a short sequence: new layers, whose weights it then replaces by its own): the new
module is built as in eager (its parameters real, drawn from torch's generator as eager draws them),
the rest traced; a module jitted and first called inside another's `__init__` is traced as usual."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import compiler


class _SwapsItsAttention(nn.Module):
    """Builds a new inner module on its first call and moves its own projection into it."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(4, 4))
        self.swapped = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.swapped:
            replacement = nn.Sequential(nn.Linear(4, 4), nn.Tanh())  # fresh weights, then replaced
            replacement[0] = self.inner[0]
            self.inner = replacement
            self.swapped = True
        return self.inner(x) * 2


@pytest.mark.parametrize("seed", [0, 1])
def test_a_module_built_in_forward_is_built_as_in_eager(seed: int) -> None:
    torch.manual_seed(seed)
    eager, compiled_model = _SwapsItsAttention(), _SwapsItsAttention()
    compiled_model.load_state_dict(eager.state_dict())
    x = torch.randn(3, 4, requires_grad=True)
    torch.manual_seed(7)
    output = compiler.jit(compiled_model)(x)
    after_compiled = torch.rand(1)  # the generator advanced as eager advances it
    torch.manual_seed(7)
    expected = eager(x)
    torch.testing.assert_close(torch.rand(1), after_compiled)
    torch.testing.assert_close(output, expected)
    assert all(type(p) is nn.Parameter for p in compiled_model.parameters())
    got = torch.autograd.grad(output.sum(), [x, compiled_model.inner[0].weight])
    want = torch.autograd.grad(expected.sum(), [x, eager.inner[0].weight])
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)


def test_a_function_jitted_inside_an_init_is_traced() -> None:
    class _WarmsUp(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = compiler.jit(lambda x: x * torch.arange(3.0))
            self.first = self.scale(torch.ones(3))

    module = _WarmsUp()
    torch.testing.assert_close(module.first, torch.arange(3.0))
    assert len(compiler.last_traces(module.scale)) > 0
