"""The executor registry: every registered executor follows the protocol, and a new executor is
one class plus one registration."""

from __future__ import annotations

import pytest
import torch

import compiler
from compiler.core.executor import EXECUTORS, Executor, ExecutorSpec, FusionExecutor, register_executor
from compiler.core.ir import BoundSymbol
from compiler.executors import TORCH, resolve
from compiler.prims import Prim


def test_every_registered_executor_follows_the_protocol():
    assert {"nvfuser", "sdpa", "torch"} <= set(EXECUTORS)
    for name, spec in EXECUTORS.items():
        assert spec.name == name and spec.description
        if spec.unavailable_reason() is not None:
            continue
        executor = spec.make(compiler.FusionOptions(runner="torch"), None)
        assert isinstance(executor, Executor), name
        assert executor.name == name
        if isinstance(executor, FusionExecutor):
            assert isinstance(executor.options, compiler.FusionOptions)


def test_resolve_appends_torch_and_names_the_known_executors_on_a_bad_name():
    assert resolve(["torch"]) == [TORCH]
    with pytest.raises(ValueError, match=r"unknown executor 'cuda'; expected names from \['nvfuser', 'sdpa', 'torch'"):
        resolve(["cuda"])
    with pytest.raises(ValueError, match="'torch' is named twice"):
        resolve(["torch", "torch"])
    with pytest.raises(TypeError, match="expected a list of executor names"):
        resolve("torch")


def test_a_name_is_registered_once():
    with pytest.raises(ValueError, match="an executor named 'torch' is already registered"):
        register_executor(ExecutorSpec("torch", lambda fusion, fallback: TORCH, lambda: None, "again"))


class _CountingSin(Executor):
    """Runs `sin` itself and counts the calls: what a new backend looks like."""

    name = "counting_sin"

    def __init__(self) -> None:
        self.calls = 0

    def implementation(self, bsym: BoundSymbol):
        if bsym.sym is not Prim.SIN:
            return None

        def run(a: torch.Tensor) -> torch.Tensor:
            self.calls += 1
            return torch.sin(a)

        return run


def test_a_new_executor_is_one_class_and_one_registration(monkeypatch):
    instance = _CountingSin()
    monkeypatch.setitem(
        EXECUTORS, "counting_sin", ExecutorSpec("counting_sin", lambda f, fb: instance, lambda: None, "sin, counted")
    )
    jfn = compiler.jit(lambda a: torch.sin(a) * 2 + 1, executors=["counting_sin", "torch"])
    for seed in range(3):
        a = torch.randn(4, 1, 3, generator=torch.Generator().manual_seed(seed))
        torch.testing.assert_close(jfn(a), torch.sin(a) * 2 + 1)
    assert instance.calls == 3
