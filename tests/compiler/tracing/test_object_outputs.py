"""Objects a module builds during its forward that hold tensors (a Hugging Face cache and its
layers) come back from a jitted module as new instances of their class holding the computed
values, their other attributes copied per call, as eager returns fresh objects per call."""

from __future__ import annotations

import torch
from torch import nn

import compiler


class Layer:
    def __init__(self) -> None:
        self.is_initialized = False
        self.keys: torch.Tensor | None = None

    def update(self, keys: torch.Tensor) -> torch.Tensor:
        self.keys = keys if self.keys is None else torch.cat([self.keys, keys], dim=-2)
        self.is_initialized = True
        return self.keys


class Cache:
    def __init__(self, layers: int) -> None:
        self.layers = [Layer() for _ in range(layers)]
        self.seen: list[str] = []  # holds no tensor: copied, never shared between calls


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.projections = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])

    def forward(self, x: torch.Tensor) -> dict:
        cache = Cache(len(self.projections))
        for projection, layer in zip(self.projections, cache.layers):
            x = projection(layer.update(x))
        cache.seen.append("forward")
        return {"out": x, "cache": cache}


def test_an_object_holding_tensors_is_rebuilt_with_the_computed_values() -> None:
    model = Model()
    jitted = compiler.jit(model)
    x = torch.randn(2, 3, 4)
    with torch.no_grad():
        got, want = jitted(x), model(x)
        again = jitted(x)
    torch.testing.assert_close(got["out"], want["out"])
    assert type(got["cache"]) is Cache and [type(layer) for layer in got["cache"].layers] == [Layer, Layer]
    for layer, expected in zip(got["cache"].layers, want["cache"].layers):
        assert list(vars(layer)) == list(vars(expected)) and layer.is_initialized
        torch.testing.assert_close(layer.keys, expected.keys)
    # mutating one call's object (a decode step grows the cache) leaves the next call's alone
    got["cache"].seen.append("decode")
    got["cache"].layers[0].update(torch.zeros(2, 1, 4))
    assert again["cache"].seen == ["forward"] and again["cache"].layers[0].keys.shape == (2, 3, 4)
    assert jitted(x)["cache"].seen == ["forward"]


def test_gradients_flow_through_the_tensors_an_object_returns() -> None:
    model = Model()
    eager = Model()
    eager.load_state_dict(model.state_dict())
    x = torch.randn(2, 3, 4)
    compiler.jit(model)(x)["cache"].layers[1].keys.sum().backward()
    eager(x)["cache"].layers[1].keys.sum().backward()
    for got, want in zip(model.parameters(), eager.parameters()):
        torch.testing.assert_close(got.grad, want.grad)
