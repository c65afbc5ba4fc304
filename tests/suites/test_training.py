"""suites/_models/training.py: the model computes with the harness's parameter tensors during a
step, and gets its own back after it, whatever happened in between."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch
from torch import nn

from suites._models.training import _computing_with


class Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(5, 3)
        self.inner = nn.Sequential(nn.Linear(3, 3), nn.LayerNorm(3))
        self.head = nn.Linear(3, 5, bias=False)
        self.head.weight = self.embed.weight  # tied: one parameter in two slots

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.inner(self.embed(ids)))


def test_the_model_computes_with_the_given_tensors_and_gets_its_own_back() -> None:
    model = Tied()
    own = list(model.parameters())
    ids = torch.tensor([0, 3, 4])
    for _ in range(2):  # the second step reuses the slots the first found
        given = [torch.zeros_like(p) for p in own]
        with _computing_with(model, given):
            assert model.head.weight is given[0] and model.embed.weight is given[0]  # tied stays tied
            assert all(p is g for p, g in zip(model.parameters(), given))
            assert torch.equal(model(ids), torch.zeros(3, 5))
        assert all(p is o for p, o in zip(model.parameters(), own))
        assert model(ids).abs().sum() > 0
    with pytest.raises(RuntimeError, match="boom"), _computing_with(model, [torch.zeros_like(p) for p in own]):
        raise RuntimeError("boom")
    assert all(p is o for p, o in zip(model.parameters(), own))


def test_a_parameter_replaced_between_steps_is_seen() -> None:
    model = Tied()
    with _computing_with(model, [p.detach().clone() for p in model.parameters()]):
        pass
    model.inner[0].weight = nn.Parameter(torch.zeros(3, 3))  # the model changed after a step
    i = [name for name, _ in model.named_parameters()].index("inner.0.weight")
    given = [p.detach().clone() for p in model.parameters()]
    with _computing_with(model, given):
        assert model.inner[0].weight is given[i]
    assert torch.equal(model.inner[0].weight, torch.zeros(3, 3)) and isinstance(model.inner[0].weight, nn.Parameter)


def test_a_model_that_computed_once_can_still_be_freed() -> None:
    model = nn.Linear(3, 3)  # its parameters are the root module's own
    with _computing_with(model, [p.detach().clone() for p in model.parameters()]):
        pass
    gone = weakref.ref(model)
    del model
    gc.collect()
    assert gone() is None
