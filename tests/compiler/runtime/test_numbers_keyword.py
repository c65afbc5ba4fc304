"""`jit(numbers=...)`: how tracing specialises number arguments, resolved once into the options the
frontend reads; `cache=`, its deprecated name, still works with one DeprecationWarning."""

from __future__ import annotations

import warnings

import pytest
import torch

import compiler
from compiler.tracing.numbers import Numbers


def split3(a: torch.Tensor, d0: int, d1: int):
    d2 = a.size(2) - d0 - d1
    x, y, z = torch.split(a, (d0, d1, d2), dim=2)
    return x * 2, y + 1, z.sin()


def _run_twenty_split_sizes(jfn: compiler.JittedFunction) -> compiler.CacheStats:
    a = torch.randn(2, 4, 64)
    for d0 in range(1, 21):
        for got, want in zip(jfn(a, d0, 8), split3(a, d0, 8)):
            torch.testing.assert_close(got, want)
    return compiler.cache_stats(jfn)


@pytest.mark.parametrize("numbers", ["symbolic", Numbers.SYMBOLIC])
def test_symbolic_numbers_compile_once_for_twenty_split_sizes(numbers) -> None:
    jfn = compiler.jit(split3, numbers=numbers)
    assert jfn.options.numbers is Numbers.SYMBOLIC
    stats = _run_twenty_split_sizes(jfn)
    assert (stats.misses, stats.hits) == (1, 19)
    assert [p.name for p in compiler.last_traces(jfn)[0].inputs] == ["a", "d0", "d1"]


def test_constant_numbers_bake_each_split_size_in() -> None:
    jfn = compiler.jit(split3, numbers="constant", automatic_dynamic=False)
    assert jfn.options.numbers is Numbers.CONSTANT
    stats = _run_twenty_split_sizes(jfn)
    assert (stats.misses, stats.hits) == (20, 0)
    assert [p.name for p in compiler.last_traces(jfn)[0].inputs] == ["a"]


def test_constant_is_the_default_and_warns_nothing() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jfn = compiler.jit(split3, automatic_dynamic=False)
        assert jfn.options.numbers is Numbers.CONSTANT
        assert _run_twenty_split_sizes(jfn).misses == 20


def test_the_deprecated_cache_keyword_warns_once_and_behaves_as_numbers() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        jfn = compiler.jit(split3, cache="symbolic")
        stats = _run_twenty_split_sizes(jfn)
    deprecations = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert len(deprecations) == 1, [str(w.message) for w in deprecations]
    assert "numbers='symbolic'" in str(deprecations[0].message)
    assert deprecations[0].filename == __file__  # points at the caller's jit(...) line
    assert jfn.options.numbers is Numbers.SYMBOLIC
    assert (stats.misses, stats.hits) == (1, 19)


def test_the_deprecated_cache_keyword_keeps_constant_mode() -> None:
    with pytest.warns(DeprecationWarning, match=r"use jit\(numbers='constant'\)"):
        jfn = compiler.jit(split3, cache="constant", automatic_dynamic=False)
    assert jfn.options.numbers is Numbers.CONSTANT
    assert _run_twenty_split_sizes(jfn).misses == 20


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"numbers": "dynamic"}, ValueError, "jit(numbers='dynamic'): expected one of 'constant', 'symbolic'"),
        ({"numbers": 1}, ValueError, "jit(numbers=1): expected one of 'constant', 'symbolic'"),
        ({"cache": "dynamic"}, ValueError, "jit(cache='dynamic'): expected one of 'constant', 'symbolic'"),
        ({"numbers": "symbolic", "cache": "constant"}, TypeError, "pass numbers= alone"),
    ],
)
def test_bad_values_name_the_keyword_and_the_allowed_values(kwargs, error, message) -> None:
    with pytest.raises(error) as raised:
        compiler.jit(split3, **kwargs)
    assert message in str(raised.value)
