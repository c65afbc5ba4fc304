"""A jitted module follows what its traces baked in: the plain attributes its forward read (a
scale, a flag choosing a branch, a submodule's setting, a config object's flag) and its submodules
themselves; a change compiles again once, an attribute the forward never read costs nothing. A
recurrent layer, which the tracer cannot install proxies into, is refused by name."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import compiler
from compiler.tracing.settings import Settings, recording_reads


class _Config:
    """A configuration object as transformers keeps one (`to_dict` marks it)."""

    def __init__(self) -> None:
        self.use_gate = True

    def to_dict(self) -> dict:
        return dict(vars(self))


class _Scaled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.act = nn.LeakyReLU(0.1)
        self.scale = 2.0
        self.relu_first = True
        self.config = _Config()
        self.steps_seen = 0  # a training loop's counter: the forward never reads it

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x) * self.scale
        y = torch.relu(y) if self.relu_first else self.act(y)
        return y * torch.sigmoid(y) if self.config.use_gate else y


def _misses(jm) -> int:
    return compiler.cache_stats(jm).misses


def test_a_changed_setting_compiles_again_and_follows_eager() -> None:
    model = _Scaled()
    jm = compiler.jit(model)
    x = torch.randn(4, 3)
    changes = [
        (lambda: None, 1),  # the first call compiles once
        (lambda: setattr(model, "steps_seen", 7), 1),  # never read: no compilation
        (lambda: setattr(model, "scale", 3.0), 2),
        (lambda: setattr(model, "relu_first", False), 3),  # a branch
        (lambda: setattr(model.act, "negative_slope", 0.5), 4),  # a submodule's setting
        (lambda: setattr(model.config, "use_gate", False), 5),  # a config object's flag
        (lambda: None, 5),
    ]
    for change, misses in changes:
        change()
        for _ in range(2):
            torch.testing.assert_close(jm(x), model(x))
        assert _misses(jm) == misses


def test_a_replaced_or_added_submodule_is_a_new_layout() -> None:
    seq = nn.Sequential(nn.Linear(3, 3), nn.Tanh())
    jm = compiler.jit(seq)
    x = torch.randn(2, 3)
    changes = [
        lambda: None,
        lambda: seq.__setitem__(1, nn.Sigmoid()),  # no tensors: the state alone would not tell
        lambda: seq.append(nn.Softplus()),
        lambda: seq.__setitem__(0, nn.Linear(3, 3)),  # same shapes
        lambda: seq.__delitem__(2),
    ]
    for change in changes:
        change()
        torch.testing.assert_close(jm(x), seq(x))
    assert _misses(jm) == len(changes)


def test_recording_notes_the_plain_attributes_read_and_restores_the_class() -> None:
    model = _Scaled()
    objects = [model, model.act, model.config]
    with recording_reads(objects) as reads:
        model(torch.randn(1, 3))
    assert type(model) is _Scaled and type(model.config) is _Config
    assert {"scale", "relu_first"} <= reads[id(model)] and "steps_seen" not in reads[id(model)]
    assert reads[id(model.config)] == {"use_gate"}
    settings = Settings()
    settings.watch(objects, reads)
    assert not settings.changed()
    model.steps_seen += 1
    assert not settings.changed()
    model.scale = 1.0
    assert settings.changed() and not settings.changed()  # changed once, then the new value is the last
    del model.scale  # gone: a change
    assert settings.changed()


def test_an_object_whose_class_cannot_be_swapped_is_watched_whole() -> None:
    class Slotted:  # a subclass would add a __weakref__ slot: no class swap
        __slots__ = ("__dict__", "k")

    slotted = Slotted()
    slotted.factor, slotted.unread = 2.0, "a"
    with recording_reads([slotted]) as reads:
        _ = slotted.factor
    assert reads == {id(slotted): None}
    settings = Settings()
    settings.watch([slotted], reads)
    assert settings.names == [("factor", "unread")]
    slotted.unread = "b"
    assert settings.changed()


def test_a_recurrent_layer_is_refused_naming_it_and_left_intact() -> None:
    model = nn.Sequential(nn.Linear(4, 4), nn.LSTM(4, 8, batch_first=True))
    with pytest.raises(NotImplementedError, match=r"module '1' \(LSTM\) is a recurrent layer"):
        compiler.jit(model)(torch.randn(2, 5, 4))
    assert isinstance(model[1].weight_ih_l0, nn.Parameter)
    model[1](torch.randn(2, 5, 4))  # still runs eagerly
