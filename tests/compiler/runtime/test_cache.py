"""The guarded cache: hits, misses and results for both `numbers` modes (issue 2's two field programs)."""

from __future__ import annotations

import pytest
import torch

import compiler


def split3(a: torch.Tensor, d0: int, d1: int):
    d2 = a.size(2) - d0 - d1
    x, y, z = torch.split(a, (d0, d1, d2), dim=2)
    return x * 2, y + 1, z.sin()


def branch(flag: int) -> torch.Tensor:
    if flag > 5:
        return torch.ones(1)
    return torch.zeros(1)


def _assert_all_close(actual, expected) -> None:
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.shape == e.shape
        torch.testing.assert_close(a, e)


def test_split3_symbolic_compiles_once_for_twenty_split_sizes() -> None:
    a = torch.randn(8, 16, 4096)
    jfn = compiler.jit(split3, numbers="symbolic")
    for d0 in range(1, 21):
        _assert_all_close(jfn(a, d0, 8), split3(a, d0, 8))
    stats = compiler.cache_stats(jfn)
    assert (stats.misses, stats.hits) == (1, 19)
    assert stats.recompilations == 0
    assert len(stats.compile_seconds) == 1 and stats.total_compile_seconds > 0


def test_split3_constant_compiles_once_per_distinct_sizes() -> None:
    a = torch.randn(8, 16, 64)
    jfn = compiler.jit(split3, numbers="constant", automatic_dynamic=False)
    for d0 in (1, 2, 3, 2, 1, 3):
        _assert_all_close(jfn(a, d0, 8), split3(a, d0, 8))
    stats = compiler.cache_stats(jfn)
    assert (stats.misses, stats.hits) == (3, 3)


def test_split3_symbolic_rejects_sizes_that_do_not_fit() -> None:
    a = torch.randn(2, 2, 16)
    jfn = compiler.jit(split3, numbers="symbolic")
    _assert_all_close(jfn(a, 4, 4), split3(a, 4, 4))
    # d2 would be negative: the guards reject the cached entry and tracing reports the error.
    with pytest.raises(ValueError, match="must be non-negative"):
        jfn(a, 10, 10)
    assert compiler.cache_stats(jfn).hits == 0


def test_branch_symbolic_guards_the_branch_taken() -> None:
    jfn = compiler.jit(branch, numbers="symbolic")
    assert jfn(6).item() == 1.0
    assert jfn(0).item() == 0.0
    assert compiler.cache_stats(jfn).misses == 2
    assert jfn(7).item() == 1.0 and jfn(-3).item() == 0.0
    assert (compiler.cache_stats(jfn).misses, compiler.cache_stats(jfn).hits) == (2, 2)
    assert "check_value" in str(compiler.last_prologue(jfn))


def test_branch_constant_compiles_per_value() -> None:
    jfn = compiler.jit(branch, numbers="constant", automatic_dynamic=False)
    assert [jfn(v).item() for v in (6, 0, 7, 6)] == [1.0, 0.0, 1.0, 1.0]
    assert (compiler.cache_stats(jfn).misses, compiler.cache_stats(jfn).hits) == (3, 1)


@pytest.mark.parametrize("numbers", ["constant", "symbolic"])
def test_shape_dtype_and_structure_changes_recompile(numbers: str) -> None:
    def f(x, y):
        return x * y

    jfn = compiler.jit(f, numbers=numbers)
    a, b = torch.randn(3, 4), torch.randn(4)
    torch.testing.assert_close(jfn(a, b), f(a, b))
    torch.testing.assert_close(jfn(a, b), f(a, b))
    assert compiler.cache_stats(jfn).misses == 1
    torch.testing.assert_close(jfn(a.double(), b.double()), f(a.double(), b.double()))
    c = torch.randn(2, 4)
    torch.testing.assert_close(jfn(c, b), f(c, b))
    torch.testing.assert_close(jfn(a, 2.5), f(a, 2.5))
    torch.testing.assert_close(jfn(a, y=b), f(a, y=b))
    assert compiler.cache_stats(jfn).misses == 5


def test_symbolic_float_scalar_is_one_compilation() -> None:
    def scale(x, alpha):
        return x * alpha + 1

    jfn = compiler.jit(scale, numbers="symbolic")
    x = torch.randn(5)
    for alpha in (0.5, 1.5, -2.0, 3.25):
        torch.testing.assert_close(jfn(x, alpha), scale(x, alpha))
    assert compiler.cache_stats(jfn).misses == 1
    # An int where a float was traced is a different type: it gets its own entry.
    torch.testing.assert_close(jfn(x, 2), scale(x, 2))
    assert compiler.cache_stats(jfn).misses == 2


def test_nested_list_and_dict_arguments_are_unpacked_and_guarded() -> None:
    def step(params, grads, options):
        return [p - options["lr"] * g for p, g in zip(params, grads)]

    params = [torch.randn(3), torch.randn(2, 2)]
    grads = [torch.randn(3), torch.randn(2, 2)]
    jfn = compiler.jit(step, numbers="symbolic")
    for lr in (0.1, 0.01):
        _assert_all_close(jfn(params, grads, {"lr": lr}), step(params, grads, {"lr": lr}))
    assert compiler.cache_stats(jfn).misses == 1
    _assert_all_close(jfn(params[:1], grads[:1], {"lr": 0.1}), step(params[:1], grads[:1], {"lr": 0.1}))
    _assert_all_close(jfn(tuple(params), grads, {"lr": 0.1}), step(tuple(params), grads, {"lr": 0.1}))
    assert compiler.cache_stats(jfn).misses == 3
    prologue = str(compiler.last_prologue(jfn))
    assert "unpack_sequence" in prologue and "unpack_dict" in prologue


def test_baked_in_python_values_are_guarded() -> None:
    def f(x, mode, dtype):
        y = x.to(dtype)
        return y.exp() if mode == "exp" else y.sin()

    jfn = compiler.jit(f, numbers="symbolic")
    x = torch.randn(4)
    torch.testing.assert_close(jfn(x, "exp", torch.float64), f(x, "exp", torch.float64))
    torch.testing.assert_close(jfn(x, "sin", torch.float64), f(x, "sin", torch.float64))
    torch.testing.assert_close(jfn(x, "exp", torch.float32), f(x, "exp", torch.float32))
    assert compiler.cache_stats(jfn).misses == 3


def test_symbolic_int_used_as_python_int_is_specialised() -> None:
    def repeat_add(x, n):
        for _ in range(n):
            x = x + 1
        return x

    jfn = compiler.jit(repeat_add, numbers="symbolic")
    x = torch.zeros(2)
    assert jfn(x, 3).tolist() == [3.0, 3.0]
    assert jfn(x, 3).tolist() == [3.0, 3.0]
    assert jfn(x, 5).tolist() == [5.0, 5.0]
    assert (compiler.cache_stats(jfn).misses, compiler.cache_stats(jfn).hits) == (2, 1)


def test_entries_are_tried_in_order_and_last_entry_is_reported() -> None:
    jfn = compiler.jit(lambda x: x + 1)
    small, large = torch.zeros(1), torch.zeros(3)
    jfn(small)
    jfn(large)
    first, second = jfn.entries
    jfn(small)
    assert jfn.last_entry is first
    jfn(large)
    assert jfn.last_entry is second
    assert compiler.last_traces(jfn) == second.traces


def test_returned_numbers_and_inputs_pass_through() -> None:
    def f(x, n):
        return x, n * 2, None

    jfn = compiler.jit(f, numbers="symbolic")
    x = torch.randn(2)
    out = jfn(x, 4)
    assert out[0] is x and out[1] == 8 and out[2] is None
    assert jfn(x, 5)[1] == 10


def test_named_tuple_outputs_keep_their_type() -> None:
    import collections

    Pair = collections.namedtuple("Pair", "low high")
    x = torch.randn(3, 4)
    maxed = compiler.jit(lambda t: t.max(1))(x)
    assert isinstance(maxed, torch.return_types.max)
    torch.testing.assert_close(maxed.values, x.max(1).values)
    assert torch.equal(maxed.indices, x.max(1).indices)
    pair = compiler.jit(lambda t: Pair(t.min(), t.max()))(x)
    assert isinstance(pair, Pair) and pair.high == x.max() and pair.low == x.min()
