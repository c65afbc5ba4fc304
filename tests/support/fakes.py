"""Test doubles for the harness: a fake clock, a timer on it, and a tiny case with variants."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch

from fusebench.cases.case import Case
from fusebench.cases.variants import Compiled, Target, Variant


class FakeClock:
    """A clock that only moves when told to."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class ScriptedTimer:
    """A timer that runs the call and reports (and spends on the clock) scripted durations."""

    def __init__(self, clock: FakeClock, durations: Iterable[float]) -> None:
        self.clock = clock
        self.durations = iter(durations)
        self.calls = 0

    def time(self, run: Callable[[], Any]) -> float:
        run()
        self.calls += 1
        duration = next(self.durations)
        self.clock.advance(duration)
        return duration


def double(x: torch.Tensor) -> torch.Tensor:
    """The tiny case's function."""
    return x * 2


def tiny_case(**changes: Any) -> Case:
    """A case doubling a small tensor, with its bytes model."""
    fields: dict[str, Any] = {
        "name": "double",
        "fn": double,
        "make_inputs": lambda params, device, seed: (torch.arange(params["n"], dtype=torch.float32, device=device),),
        "bytes_moved": lambda params: 2 * 4 * params["n"],
        "params": {"n": [8]},
    }
    fields.update(changes)
    return Case(**fields)


def variant_from(name: str, make: Callable[[Target], Callable[..., Any]], **compiled: Any) -> Variant:
    """A variant whose prepared function is `make(target)`."""
    return Variant(name, lambda target: Compiled(make(target), **compiled))
