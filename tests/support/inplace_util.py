"""Helpers for the in-place tests: run a function eagerly and jitted on clones of the same
arguments, compare outputs and the arguments' final contents, and check every pass."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

import compiler
from compiler.prims import INPLACE, Prim
from compiler.tracing.check_trace import check_trace
from compiler.tracing.check_writebacks import check_writebacks
from compiler.tracing.interpreter import eval_trace


def same_layout(tensor: torch.Tensor) -> torch.Tensor:
    """A copy of `tensor` with its strides: gaps kept (`clone` and `.to` make a tensor with gaps,
    such as `x[..., ::2]`, dense) and an expanded tensor's stride-0 dims too."""
    if 0 in tensor.stride() and tensor.numel() > 1:
        base = tensor[tuple(slice(0, 1) if s == 0 else slice(None) for s in tensor.stride())]
        return base.clone().expand(tensor.shape)
    return torch.empty_strided(tensor.shape, tensor.stride(), dtype=tensor.dtype, device=tensor.device).copy_(tensor)


def clone_args(value: Any, memo: dict[int, torch.Tensor] | None = None) -> Any:
    """A deep copy of an argument tree; a tensor that appears twice is cloned once (aliasing kept)."""
    memo = {} if memo is None else memo
    if isinstance(value, torch.Tensor):
        if id(value) not in memo:
            memo[id(value)] = same_layout(value)
        return memo[id(value)]
    if isinstance(value, (tuple, list)):
        return type(value)(clone_args(v, memo) for v in value)
    if isinstance(value, dict):
        return {k: clone_args(v, memo) for k, v in value.items()}
    return value


def tensors_in(value: Any) -> list[Any]:
    """The leaves of an output or argument tree, in order (tensors and everything else)."""
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in tensors_in(v)]
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in tensors_in(v)]
    return [value]


def assert_same(actual: Any, expected: Any, exact: bool | float = True, what: str = "") -> None:
    """Leaf-by-leaf equality of two trees, NaNs equal: bit-exact (True), float32 tolerance
    (False), or within a given relative and absolute tolerance (a float)."""
    actual_leaves, expected_leaves = tensors_in(actual), tensors_in(expected)
    assert len(actual_leaves) == len(expected_leaves), f"{what}: {len(actual_leaves)} != {len(expected_leaves)} leaves"
    for i, (a, e) in enumerate(zip(actual_leaves, expected_leaves)):
        if isinstance(e, torch.Tensor):
            tolerance = (
                {"rtol": 0, "atol": 0} if exact is True else {} if exact is False else {"rtol": exact, "atol": exact}
            )
            torch.testing.assert_close(a, e, equal_nan=True, msg=lambda m, i=i: f"{what} leaf {i}: {m}", **tolerance)
        else:
            assert a == e, f"{what} leaf {i}: {a!r} != {e!r}"


def check_passes(
    jfn: compiler.JittedFunction, args: tuple, expected: Any, expected_args: tuple, exact: bool | float
) -> None:
    """For the entry `jfn` used last: check_trace after every pass, every trace evaluates to the
    eager result (outputs and final argument contents), the final trace keeps the write-back
    contract, and functionalization left no in-place prim."""
    entry = jfn.last_entry
    traces = compiler.last_traces(jfn)
    for trace in traces:
        check_trace(trace)
        fresh = clone_args(args)
        output = eval_trace(trace, *entry.prologue(fresh, {}))
        assert_same(output, expected, exact, f"eval of the trace after {trace.provenance}")
        assert_same(fresh, expected_args, exact, f"arguments after eval of the trace after {trace.provenance}")
    for trace in traces[1:]:
        leaves = [b for b in trace.bsyms if b.sym in INPLACE]
        assert not leaves, f"{trace.provenance} left in-place prims: {leaves}"
    check_writebacks(traces[-1])


def check_compiled(
    fn: Callable, *args: Any, numbers: str = "constant", exact: bool | float = True
) -> compiler.JittedFunction:
    """Runs `fn` eagerly and jitted on clones of `args`, asserts the outputs and every argument's
    final contents agree, then checks the passes (`check_passes`). Returns the jitted function."""
    eager_args, jit_args = clone_args(args), clone_args(args)
    expected = fn(*eager_args)
    jfn = compiler.jit(fn, numbers=numbers)
    actual = jfn(*jit_args)
    assert_same(actual, expected, exact, "output")
    assert_same(jit_args, eager_args, exact, "arguments after the call")
    check_passes(jfn, args, expected, eager_args, exact)
    return jfn


def sharing(tensors: Any) -> list[tuple[int, int]]:
    """The pairs of positions whose tensors live in one storage (an empty tensor shares nothing)."""
    storages = [t.untyped_storage().data_ptr() if t.numel() else -1 - i for i, t in enumerate(tensors)]
    return [(i, j) for i in range(len(storages)) for j in range(i + 1, len(storages)) if storages[i] == storages[j]]


def count_writebacks(trace: compiler.Trace) -> int:
    """How many `prims.copy_to` the trace holds at top level."""
    return sum(1 for b in trace.bsyms if b.sym is Prim.COPY_TO)
