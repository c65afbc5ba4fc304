"""The dispatcher (compiler/runtime/dispatch.py): every entry's guards, and short computations,
inlined into one generated function that a jitted call reaches without a Python `__call__`."""

from __future__ import annotations

import functools
import inspect
from typing import Any

import pytest
import torch

import compiler
from compiler.core.errors import GuardFailure
from compiler.runtime.cache import CacheEntry, JittedFunction
from compiler.runtime.dispatch import INLINED, INLINED_LINES


def _generated(source: str) -> Any:
    """A function as codegen makes it: globals of its own, its source in `__fusebench_source__`."""
    scope: dict[str, Any] = {"_GuardFailure_0": GuardFailure, "_mul_1": torch.mul, "_sub_2": torch.sub}
    exec(source, scope)
    (fn,) = [v for k, v in scope.items() if not k.startswith("_")]
    fn.__fusebench_source__ = source
    return fn


def _entry(prologue: Any, computation: Any) -> CacheEntry:
    return CacheEntry(prologue, computation, prologue_trace=None, traces=[], compile_seconds=0.0)


def _hand_jitted(*entries: CacheEntry) -> JittedFunction:
    queue = list(entries)
    return JittedFunction(lambda *args: None, lambda args, kwargs, dynamic: queue.pop(0))


def test_a_generated_entry_runs_inline_and_counts_hits() -> None:
    jfn = compiler.jit(lambda x: x * 2 - 1)
    x = torch.randn(5)
    for _ in range(3):
        torch.testing.assert_close(jfn(x), x * 2 - 1)
    source = jfn.func.__fusebench_source__
    assert "_prologue_0(" not in source and "_computation_0(" not in source, source
    assert compiler.cache_stats(jfn).hits == 2 and compiler.cache_stats(jfn).misses == 1


def test_the_jitted_function_stays_one_object_with_the_wrapped_signature() -> None:
    def scale(x: torch.Tensor, factor: float = 2.0) -> torch.Tensor:
        """Doc of scale."""
        return x * factor

    jfn = compiler.jit(scale)
    dispatch = jfn.func
    jfn(torch.ones(2))
    jfn(torch.ones(3), factor=3.0)
    assert jfn.func is dispatch and len(jfn.entries) == 2
    assert inspect.signature(jfn) == inspect.signature(scale)
    assert jfn.__doc__ == "Doc of scale." and jfn.__name__ == "scale"
    assert repr(jfn) == f"<jitted {scale.__qualname__}: 2 cache entries>"


def test_entries_beyond_the_inlined_ones_still_hit_in_order() -> None:
    jfn = compiler.jit(lambda x: x + 1, automatic_dynamic=False)  # one entry per size
    sizes = range(1, INLINED + 4)
    for n in sizes:
        jfn(torch.zeros(n))
    for n in reversed(sizes):
        torch.testing.assert_close(jfn(torch.zeros(n)), torch.ones(n))
        assert jfn.last_entry is jfn.entries[n - 1]
    stats = compiler.cache_stats(jfn)
    assert (stats.misses, stats.hits) == (len(sizes), len(sizes))


def test_hand_written_entries_are_called() -> None:
    def prologue(args: tuple, kwargs: dict) -> tuple:
        if len(args) != 2:
            raise GuardFailure
        return args

    jfn = _hand_jitted(_entry(prologue, lambda a, b: a - b))
    assert jfn(5, 3) == 2 and jfn(10, 1) == 9
    assert "_prologue_0(args, kwargs)" in jfn.func.__fusebench_source__
    assert compiler.cache_stats(jfn).hits == 1


def test_a_runner_that_carries_its_computations_source_is_called() -> None:
    class Runner:  # like a CUDA-graph or autograd runner: the source is the wrapped computation's
        def __init__(self, computation: Any) -> None:
            self.computation = computation
            self.__fusebench_source__ = computation.__fusebench_source__
            self.calls = 0

        def __call__(self, *inputs: Any) -> Any:
            self.calls += 1
            return self.computation(*inputs)

    prologue = _generated("def prologue(args, kwargs):\n  x, = args\n  return (x,)\n")
    runner = Runner(_generated("def computation(x):\n  t0 = _mul_1(x, 3.0)\n  return t0\n"))
    jfn = _hand_jitted(_entry(prologue, runner))
    x = torch.randn(3)
    jfn(x)
    torch.testing.assert_close(jfn(x), x * 3.0)
    assert runner.calls == 2


def test_inputs_bound_to_differently_named_parameters_keep_their_order() -> None:
    prologue = _generated(
        "def prologue(args, kwargs):\n  if len(args) != 2: raise _GuardFailure_0\n  a, b = args\n  return (b, a)\n"
    )
    computation = _generated("def computation(a, b):\n  t0 = _sub_2(a, b)\n  return t0\n")
    jfn = _hand_jitted(_entry(prologue, computation))
    jfn(torch.tensor(1.0), torch.tensor(5.0))
    assert jfn(torch.tensor(1.0), torch.tensor(5.0)).item() == 4.0  # the hit: computation(b, a)
    assert "a, b, = b, a," in jfn.func.__fusebench_source__


def test_a_long_prologue_or_computation_is_called_not_inlined() -> None:
    lines = "\n".join(f"  t{i + 1} = _mul_1(t{i}, 1.0)" for i in range(INLINED_LINES))
    long_computation = _generated(f"def computation(t0):\n{lines}\n  return t{INLINED_LINES}\n")
    guards = "\n".join("  if len(args) != 1: raise _GuardFailure_0" for _ in range(INLINED_LINES))
    long_prologue = _generated(f"def prologue(args, kwargs):\n{guards}\n  x, = args\n  return (x,)\n")
    prologue = _generated("def prologue(args, kwargs):\n  x, = args\n  return (x,)\n")
    computation = _generated("def computation(x):\n  t0 = _mul_1(x, 1.0)\n  return t0\n")
    x = torch.randn(3)
    for entry, called in [
        ((prologue, long_computation), "_computation_0(x)"),
        ((long_prologue, computation), "_prologue_0("),
    ]:
        jfn = _hand_jitted(_entry(*entry))
        jfn(x)
        torch.testing.assert_close(jfn(x), x)
        assert called in jfn.func.__fusebench_source__, jfn.func.__fusebench_source__


def test_deletions_do_not_count_toward_the_inlining_limit() -> None:
    steps = INLINED_LINES - 2  # with the parameter line and the return: within the limit
    lines = "\n".join(f"  t{i + 1} = _mul_1(t{i}, 1.0)" + (f"\n  del t{i}" if i else "") for i in range(steps))
    computation = _generated(f"def computation(t0):\n{lines}\n  return t{steps}\n")
    assert computation.__fusebench_source__.count("\n") > INLINED_LINES
    prologue = _generated("def prologue(args, kwargs):\n  x, = args\n  return (x,)\n")
    jfn = _hand_jitted(_entry(prologue, computation))
    x = torch.randn(3)
    jfn(x)
    torch.testing.assert_close(jfn(x), x)
    assert "_computation_0(" not in jfn.func.__fusebench_source__ and "del t1" in jfn.func.__fusebench_source__


def test_an_error_in_a_computation_is_raised_not_taken_for_a_guard_failure() -> None:
    def prologue(args: tuple, kwargs: dict) -> tuple:
        return args

    def computation(x: int) -> int:
        raise ValueError(f"bad {x}")

    second = _entry(prologue, lambda x: x)
    jfn = _hand_jitted(_entry(prologue, computation), second)
    with pytest.raises(ValueError, match="bad 1"):
        jfn(1)
    with pytest.raises(ValueError, match="bad 2"):
        jfn(2)
    assert len(jfn.entries) == 1


@pytest.mark.parametrize("seed", [0, 1])
def test_a_jitted_module_and_a_partial_of_a_jitted_function_dispatch_alike(seed: int) -> None:
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh())
    jmodel = compiler.jit(model)
    add = functools.partial(compiler.jit(torch.add), alpha=2)
    x = torch.randn(2, 4)
    for _ in range(2):
        torch.testing.assert_close(jmodel(x), model(x))
        torch.testing.assert_close(add(x, x), torch.add(x, x, alpha=2))
    assert compiler.cache_stats(jmodel).hits == 1
