"""Globals and closure variables a jitted program reads: a change is seen on the next call
(compiler/tracing/free_values.py)."""

from __future__ import annotations

import dataclasses
import sys

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import compiler
from compiler import examine
from compiler.tracing import free_values

THIS = sys.modules[__name__]
SCALE = 2.0
DTYPE = torch.float32
ACTIVATION = F.relu
OFFSETS = [1, 2]


@dataclasses.dataclass
class Config:
    gain: float = 1.5
    use_bias: bool = True


CONFIG = Config()


def _scale() -> float:
    return SCALE  # NOTE: no op here: only the static reading of the program's helpers finds it


def _changes(jitted: compiler.JittedFunction) -> list[str]:
    return [str(miss) for r in examine.recompilations(jitted) for miss in r.misses]


@pytest.mark.parametrize("seed", [0, 1])
def test_a_global_number_read_directly_or_through_a_helper_follows_its_changes(
    monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    def program(t: torch.Tensor) -> torch.Tensor:
        return t * SCALE + _scale()

    t = torch.randn(4, 3, generator=torch.Generator().manual_seed(seed))
    jitted = compiler.jit(program)
    torch.testing.assert_close(jitted(t), program(t))
    monkeypatch.setattr(THIS, "SCALE", 5.0)
    torch.testing.assert_close(jitted(t), program(t))
    assert len(jitted.entries) == 2
    assert any("global SCALE of" in c and "expected 2.0, got 5.0" in c for c in _changes(jitted))
    monkeypatch.setattr(THIS, "SCALE", 2.0)  # the first value again: its entry, no compilation
    torch.testing.assert_close(jitted(t), program(t))
    assert len(jitted.entries) == 2


def test_a_closure_variable_and_the_items_of_a_closed_over_list_follow_their_changes() -> None:
    def make(scale: float) -> tuple:
        offsets = [1.0]

        def program(t: torch.Tensor) -> torch.Tensor:
            return t * scale + offsets[0]

        def set_scale(value: float) -> None:
            nonlocal scale
            scale = value

        return program, set_scale, offsets

    program, set_scale, offsets = make(3.0)
    jitted = compiler.jit(program)
    t = torch.randn(5)
    torch.testing.assert_close(jitted(t), program(t))
    set_scale(7.0)
    torch.testing.assert_close(jitted(t), program(t))
    offsets[0] = -4.0
    torch.testing.assert_close(jitted(t), program(t))
    assert len(jitted.entries) == 3
    assert any("closure variable scale of" in c for c in _changes(jitted))
    assert any("closure variable offsets of" in c for c in _changes(jitted))


def test_a_global_function_swapped_for_another_is_called(monkeypatch: pytest.MonkeyPatch) -> None:
    def program(t: torch.Tensor) -> torch.Tensor:
        return ACTIVATION(t) + OFFSETS[1]

    t = torch.randn(6)
    jitted = compiler.jit(program)
    torch.testing.assert_close(jitted(t), program(t))
    monkeypatch.setattr(THIS, "ACTIVATION", torch.tanh)
    torch.testing.assert_close(jitted(t), program(t))
    monkeypatch.setattr(THIS, "OFFSETS", [1, 9])
    torch.testing.assert_close(jitted(t), program(t))
    assert len(jitted.entries) == 3


def test_a_global_dtype_and_a_number_of_another_type_compile_again(monkeypatch: pytest.MonkeyPatch) -> None:
    def program(t: torch.Tensor) -> torch.Tensor:
        return (t * SCALE).to(DTYPE)

    t = torch.arange(6)
    jitted = compiler.jit(program)
    monkeypatch.setattr(THIS, "SCALE", 2)
    assert jitted(t).dtype == torch.float32
    monkeypatch.setattr(THIS, "SCALE", 2.0)  # equal to 2, another type: a float product
    monkeypatch.setattr(THIS, "DTYPE", torch.float64)
    torch.testing.assert_close(jitted(t), program(t))
    assert jitted(t).dtype == torch.float64


def test_a_global_settings_object_is_followed_attribute_by_attribute() -> None:
    def program(t: torch.Tensor) -> torch.Tensor:
        return t * CONFIG.gain + (1.0 if CONFIG.use_bias else 0.0)

    t = torch.randn(3)
    jitted = compiler.jit(program)
    try:
        torch.testing.assert_close(jitted(t), program(t))
        CONFIG.use_bias = False
        torch.testing.assert_close(jitted(t), program(t))
        CONFIG.gain = -2.0
        torch.testing.assert_close(jitted(t), program(t))
    finally:
        CONFIG.gain, CONFIG.use_bias = 1.5, True
    assert len(jitted.entries) == 3


@dataclasses.dataclass(frozen=True)
class FrozenConfig:
    gain: float = 1.5
    name: str = "scaled"


def test_a_frozen_settings_object_is_guarded_by_identity_alone() -> None:
    # its attributes cannot be set again: another value is another object, which the guard sees
    config = FrozenConfig()

    def program(t: torch.Tensor) -> torch.Tensor:
        return t * config.gain if config.name == "scaled" else t

    t = torch.randn(3)
    jitted = compiler.jit(program)
    torch.testing.assert_close(jitted(t), program(t))
    source = jitted.func.__fusebench_source__
    assert "'gain'" not in source and "'name'" not in source, source
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.gain = 3.0  # type: ignore[misc]
    config = FrozenConfig(gain=-2.0)
    torch.testing.assert_close(jitted(t), program(t))
    config = dataclasses.replace(config, name="plain")
    torch.testing.assert_close(jitted(t), program(t))
    assert len(jitted.entries) == 3


def test_a_module_forward_follows_the_globals_of_its_file(monkeypatch: pytest.MonkeyPatch) -> None:
    class Scaled(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.lin(x) * SCALE

    model = Scaled()
    jitted = compiler.jit(model)
    x = torch.randn(2, 3)
    torch.testing.assert_close(jitted(x), model(x))
    monkeypatch.setattr(THIS, "SCALE", -1.0)
    torch.testing.assert_close(jitted(x), model(x))


def test_what_the_program_changes_itself_and_its_per_call_closures_compile_once() -> None:
    seen: list[int] = []

    def program(t: torch.Tensor, n: float) -> torch.Tensor:
        seen.append(1)  # a record the program keeps: later calls do not run its Python again
        scaled = lambda x: x * n
        return scaled(t)

    jitted = compiler.jit(program)
    t = torch.randn(4)
    for n in (2.0, 3.0, 4.0, 5.0):
        torch.testing.assert_close(jitted(t, n), t * n)
    assert len(jitted.entries) == 2  # n made symbolic by automatic dynamic, as without closures


def test_code_of_installed_packages_and_of_torch_is_not_read() -> None:
    assert free_values._installed(torch.__file__)
    assert free_values._installed(dataclasses.__file__)
    assert not free_values._installed(__file__)


STEP = 1
ROWS = 2


def test_a_global_number_changing_every_call_becomes_symbolic_after_one_change(monkeypatch: pytest.MonkeyPatch) -> None:
    def program(t: torch.Tensor) -> torch.Tensor:
        scale = SCALE * 0.5 if STEP > 3 else SCALE  # a branch on it: guarded, not baked
        return t * scale + STEP

    t = torch.randn(4)
    jitted = compiler.jit(program)
    for step in range(8):
        monkeypatch.setattr(THIS, "STEP", step)
        monkeypatch.setattr(THIS, "SCALE", 0.5 + step)
        torch.testing.assert_close(jitted(t), program(t))
    recompilations = examine.recompilations(jitted)
    assert "making global SCALE of" in str(recompilations[0]) and "global STEP of" in str(recompilations[0])
    assert len(jitted.entries) == 3  # the first values, symbolic ones, then the branch's other side


def test_a_symbolic_global_used_as_a_size_and_without_automatic_dynamic(monkeypatch: pytest.MonkeyPatch) -> None:
    def program(t: torch.Tensor) -> torch.Tensor:
        return t.reshape(ROWS, -1).sum(0) * STEP

    t = torch.randn(12)
    automatic, constant = compiler.jit(program), compiler.jit(program, automatic_dynamic=False)
    for rows, step in ((2, 1), (3, 2), (4, 3), (6, 4)):
        monkeypatch.setattr(THIS, "ROWS", rows)
        monkeypatch.setattr(THIS, "STEP", step)
        torch.testing.assert_close(automatic(t), program(t))
        torch.testing.assert_close(constant(t), program(t))
    assert len(constant.entries) == 4


def test_two_closures_of_one_function_are_made_symbolic_each_on_its_own() -> None:
    def make(scale: float) -> tuple:
        def program(t: torch.Tensor) -> torch.Tensor:
            return t * scale

        def set_scale(value: float) -> None:
            nonlocal scale
            scale = value

        return program, set_scale

    (first, set_first), (second, set_second) = make(1.0), make(2.0)
    jitted_first, jitted_second = compiler.jit(first), compiler.jit(second)
    t = torch.randn(3)
    for value in (3.0, 4.0, 5.0, 6.0):
        set_first(value)
        set_second(-value)
        torch.testing.assert_close(jitted_first(t), t * value)
        torch.testing.assert_close(jitted_second(t), t * -value)
    assert len(jitted_first.entries) == len(jitted_second.entries) == 2


MODEL = nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.5), nn.Linear(4, 2))


def test_a_model_held_by_a_global_is_read_on_every_call_and_followed(monkeypatch: pytest.MonkeyPatch) -> None:
    def program(x: torch.Tensor) -> torch.Tensor:
        return MODEL(x).softmax(-1)

    MODEL.eval()
    jitted = compiler.jit(program)
    x = torch.randn(5, 3)
    torch.testing.assert_close(jitted(x), program(x))
    with torch.no_grad():
        MODEL[0].weight.mul_(2.0)  # its parameters are inputs, read every call
    torch.testing.assert_close(jitted(x), program(x))
    other = nn.Sequential(nn.Linear(3, 4), nn.Identity(), nn.Linear(4, 2)).eval()
    monkeypatch.setattr(THIS, "MODEL", other)  # another model: compiles again
    torch.testing.assert_close(jitted(x), program(x))
    assert len(jitted.entries) == 2
    other.train()  # its modes are guarded (dropout would draw)
    jitted(x)
    assert len(jitted.entries) == 3
    assert any("train/eval modes of module MODEL" in c for c in _changes(jitted))


def test_a_model_held_by_a_closure_gets_its_gradients() -> None:
    model = nn.Linear(3, 2)

    def loss(x: torch.Tensor) -> torch.Tensor:
        return model(x).square().mean()

    x = torch.randn(4, 3)
    compiler.jit(loss)(x).backward()
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    loss(x).backward()
    for actual, expected in zip(got, (p.grad for p in model.parameters())):
        torch.testing.assert_close(actual, expected)
