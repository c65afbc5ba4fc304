"""Output structures rebuilt from leaves: objects get fresh copies of mutable constants only."""

from __future__ import annotations

import copy

import pytest
import torch

from compiler.core.ir import Proxy
from compiler.tracing import structure


class Holder:
    """An object a program builds and returns, with a traced tensor among its attributes."""

    def __init__(self, value: object, **constants: object) -> None:
        self.value = value
        self.__dict__.update(constants)


def _spec_of(holder: Holder) -> structure.Spec:
    proxy = Proxy.__new__(Proxy)  # NOTE: only its type matters to flatten
    holder.value = proxy
    leaves, spec = structure.flatten(holder)
    assert leaves == [proxy]
    return spec


def test_mutable_constants_are_copied_for_every_rebuild() -> None:
    spec = _spec_of(Holder(None, seen=[1, 2], table={"a": 1}))
    first, second = spec.rebuild([torch.ones(1)]), spec.rebuild([torch.zeros(1)])
    first.seen.append(3)
    first.table["b"] = 2
    assert second.seen == [1, 2] and second.table == {"a": 1}
    assert not spec.atomic_constants


def test_atomic_constants_are_shared_without_a_deep_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    constants = {"flag": True, "size": 3, "name": "k", "dtype": torch.bfloat16, "shape": (2, (3, None))}
    spec = _spec_of(Holder(None, device=torch.device("cpu"), kind=int, **constants))
    assert spec.atomic_constants
    monkeypatch.setattr(copy, "deepcopy", lambda *a, **k: pytest.fail("deep-copied atomic constants"))
    tensor = torch.ones(2)
    rebuilt = spec.rebuild([tensor])
    assert type(rebuilt) is Holder and rebuilt.value is tensor
    assert {k: getattr(rebuilt, k) for k in constants} == constants and rebuilt.kind is int


def test_a_tuple_holding_a_list_is_not_atomic() -> None:
    spec = _spec_of(Holder(None, pair=(1, [2])))
    assert not spec.atomic_constants
    first = spec.rebuild([torch.ones(1)])
    first.pair[1].append(3)
    assert spec.rebuild([torch.ones(1)]).pair == (1, [2])
