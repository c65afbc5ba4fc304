"""Automatic dynamic under numbers="constant": rejected numbers become symbolic, results stay exact,
and every recompilation says which guard failed on which input (sizes: test_auto_dynamic_sizes.py)."""

from __future__ import annotations

import pytest
import torch

import compiler
from compiler.runtime.auto_dynamic import explain, to_make_symbolic


def split3(a: torch.Tensor, d0: int, d1: int):
    d2 = a.size(2) - d0 - d1
    x, y, z = torch.split(a, (d0, d1, d2), dim=2)
    return x * 2, y + 1, z.sin()


def branch(x: torch.Tensor, flag: int) -> torch.Tensor:
    if flag > 5:
        return x + flag
    return x * flag


def bias_corrected(x: torch.Tensor, step: int, *, beta: float = 0.9) -> torch.Tensor:
    return x / (1 - beta**step)


def _assert_all_close(actual, expected) -> None:
    if isinstance(expected, torch.Tensor):
        actual, expected = (actual,), (expected,)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.shape == e.shape
        torch.testing.assert_close(a, e)


@pytest.mark.parametrize("seed", [0, 1])
def test_split3_compiles_twice_for_twenty_split_sizes(seed: int) -> None:
    a = torch.randn(2, 4, 64, generator=torch.Generator().manual_seed(seed))
    jfn = compiler.jit(split3)
    for d0 in range(1, 21):
        _assert_all_close(jfn(a, d0, 8), split3(a, d0, 8))
    stats = compiler.cache_stats(jfn)
    assert (stats.misses, stats.hits) == (2, 18)
    (recompilation,) = compiler.examine.recompilations(jfn)
    assert recompilation.call == 2 and recompilation.made_symbolic == ("d0",)
    (miss,) = recompilation.misses
    assert (miss.kind, miss.input, miss.expected, miss.actual) == ("value", "d0", 1, 2)
    assert "entry 0: value of d0: expected 1, got 2" in str(compiler.examine.recompilations(jfn))
    assert "check_type(d0, int)" in str(compiler.last_prologue(jfn))
    assert "check_value(d1, 8)" in str(compiler.last_prologue(jfn))


def test_without_automatic_dynamic_every_value_compiles() -> None:
    a = torch.randn(2, 4, 64)
    jfn = compiler.jit(split3, automatic_dynamic=False)
    for d0 in range(1, 6):
        _assert_all_close(jfn(a, d0, 8), split3(a, d0, 8))
    assert compiler.cache_stats(jfn).misses == 5
    assert all(not r.made_symbolic for r in compiler.examine.recompilations(jfn))


def test_branches_taken_on_a_symbolic_number_stay_guarded() -> None:
    x = torch.randn(3)
    jfn = compiler.jit(branch)
    for flag in (6, 0, 7, -3, 9, 6, 2):
        _assert_all_close(jfn(x, flag), branch(x, flag))
    # 6: static; 0: flag symbolic, branch flag <= 5; 7: the branch flag > 5. Every later value hits.
    assert compiler.cache_stats(jfn).misses == 3
    last = compiler.examine.recompilations(jfn)[-1]
    assert {(m.entry, m.kind) for m in last.misses} == {(0, "value"), (1, "branch")}


def test_keyword_and_float_scalars_become_symbolic() -> None:
    x = torch.randn(5)
    jfn = compiler.jit(bias_corrected)
    for step in range(1, 8):
        _assert_all_close(jfn(x, step, beta=0.9), bias_corrected(x, step, beta=0.9))
    for beta in (0.8, 0.7, 0.95):
        _assert_all_close(jfn(x, 7, beta=beta), bias_corrected(x, 7, beta=beta))
    assert compiler.cache_stats(jfn).misses == 3  # first call, step symbolic, beta symbolic
    assert [r.made_symbolic for r in compiler.examine.recompilations(jfn)] == [("step",), ("beta",)]


def test_numbers_in_a_list_become_symbolic() -> None:
    def split(a, sizes):
        return [p.cos() for p in torch.split(a, sizes)]

    a = torch.randn(12, 3)
    jfn = compiler.jit(split)
    for sizes in ([2, 10], [3, 9], [4, 8], [6, 6]):
        _assert_all_close(jfn(a, sizes), split(a, sizes))
    assert compiler.cache_stats(jfn).misses == 2
    assert set(compiler.examine.recompilations(jfn)[0].made_symbolic) == {"sizes_0", "sizes_1"}


def test_dtypes_and_structure_are_reported_not_made_symbolic() -> None:
    def f(x, n):
        return x * n

    jfn = compiler.jit(f)
    jfn(torch.randn(4), 2)
    jfn(torch.randn(5), 2)
    jfn(torch.randn(5, dtype=torch.float64), 2)
    kinds = [[(m.kind, m.input) for m in r.misses] for r in compiler.examine.recompilations(jfn)]
    assert kinds == [[("size", "x")], [("dtype", "x"), ("dtype", "x")]]
    # the size became symbolic (tests/compiler/runtime/test_auto_dynamic_sizes.py); the dtype did not
    assert [r.made_symbolic for r in compiler.examine.recompilations(jfn)] == [("x.size(0)",), ()]
    prologue = compiler.last_prologue(jfn)
    (structure,) = explain(0, prologue, (torch.randn(5),), {})
    assert (structure.kind, structure.expected, structure.actual) == ("structure", "length 2", "length 1")
    assert to_make_symbolic([structure]) == set()


def test_a_changed_number_type_is_not_made_symbolic() -> None:
    def f(x, n):
        return x * n

    jfn = compiler.jit(f)
    x = torch.randn(3)
    _assert_all_close(jfn(x, 2), f(x, 2))
    _assert_all_close(jfn(x, 2.5), f(x, 2.5))
    (recompilation,) = compiler.examine.recompilations(jfn)
    assert recompilation.made_symbolic == () and recompilation.misses[0].actual == 2.5


def test_symbolic_cache_records_branch_misses() -> None:
    jfn = compiler.jit(branch, numbers="symbolic")
    x = torch.randn(2)
    jfn(x, 6)
    jfn(x, 1)
    (recompilation,) = compiler.examine.recompilations(jfn)
    assert [m.kind for m in recompilation.misses] == ["branch"] and not recompilation.made_symbolic


def test_a_number_that_cannot_be_traced_symbolically_stays_constant() -> None:
    def scaled(x, n):
        return x * {1: 2.0, 2: 3.0, 3: 5.0}[n]  # a dict lookup needs the number's value

    x = torch.randn(4)
    jfn = compiler.jit(scaled)
    traced = []
    compile_entry = jfn._compile_entry
    jfn._compile_entry = lambda args, kwargs, dynamic: traced.append(dynamic) or compile_entry(args, kwargs, dynamic)
    for n in (1, 2, 3, 2):
        _assert_all_close(jfn(x, n), scaled(x, n))
    assert compiler.cache_stats(jfn).misses == 3
    assert all(not r.made_symbolic for r in compiler.examine.recompilations(jfn))
    # n is tried symbolic once (call 2), then kept constant without trying again (call 3)
    assert traced == [frozenset(), frozenset({"n"}), frozenset(), frozenset()]
    assert jfn.kept_constant == {"n"}
