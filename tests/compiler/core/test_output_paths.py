"""A computation whose output has values replaced at paths (compiler/core/output_paths.py): written
into generated code's `return` where it can be, so the dispatcher inlines the whole computation,
and a wrapper otherwise; both give the same output."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import compiler
from compiler.core.output_paths import ReplacedAtPaths, replaced_at_paths
from compiler.core.python_code import code_for


def _generated(source: str) -> Any:
    scope: dict[str, Any] = {"_mul": torch.mul}
    exec(code_for(source, "<test>"), scope)
    fn = scope["computation"]
    fn.__fusebench_source__ = source
    return fn


def _negated(value: Any) -> Any:
    return -value


SOURCE = """def computation(x):
  a = _mul(x, 2)
  return (a, {'b': [a, 1], 'c': a}, x)
"""


@pytest.mark.parametrize("paths", [((0,),), ((1, "b", 0), (1, "c")), ((0,), (2,)), ((1, "b", 0), (1, "b", 0))], ids=str)
def test_paths_through_the_returned_literals_are_written_into_the_generated_code(paths) -> None:
    computation = _generated(SOURCE)
    x = torch.randn(3)
    made = replaced_at_paths(computation, paths, _negated)
    assert not isinstance(made, ReplacedAtPaths) and "__fusebench_source__" in dir(made)
    assert "_replaced_" in made.__fusebench_source__
    expected = ReplacedAtPaths(computation, paths, _negated)(x)
    torch.testing.assert_close(made(x), expected)
    assert computation(x)[0].sum() == (2 * x).sum(), "the computation itself is unchanged"


def test_a_tensor_method_is_written_as_a_method_call() -> None:
    def contiguous(value: Any) -> Any:
        return value.contiguous()

    contiguous.method = "contiguous"  # type: ignore[attr-defined]
    made = replaced_at_paths(_generated(SOURCE), ((1, "c"),), contiguous)
    assert "'c': a.contiguous()" in made.__fusebench_source__


@pytest.mark.parametrize(
    ("source", "path"),
    [
        ("def computation(x):\n  return _mul(x, 2)\n", (0,)),  # into a call's result
        ("def computation(x):\n  a = (x, x)\n  return a\n", (1,)),  # into a name
        ("def computation(x):\n  return (x, *[x])\n", (0,)),  # a starred tuple
        ("def computation(x):\n  return (x,)\n", (3,)),  # past its end
        ("def computation(x):\n  return {_mul: x}\n", ("b",)),  # a key that is no literal
    ],
)
def test_a_path_that_leaves_the_literals_keeps_the_wrapper(source: str, path: tuple) -> None:
    computation = _generated(source)
    made = replaced_at_paths(computation, (path,), _negated)
    assert isinstance(made, ReplacedAtPaths)


def test_no_paths_or_no_generated_code_is_left_as_it_is() -> None:
    computation = _generated(SOURCE)
    assert replaced_at_paths(computation, (), _negated) is computation
    assert isinstance(replaced_at_paths(lambda x: (x,), ((0,),), _negated), ReplacedAtPaths)


def test_a_returned_softmax_runs_inline_in_the_dispatcher_and_is_contiguous() -> None:
    jfn = compiler.jit(lambda x: torch.softmax(x.t(), -1))
    x = torch.randn(4, 6)
    for _ in range(2):
        out = jfn(x)
    assert out.is_contiguous() and out.stride() == torch.softmax(x.t(), -1).stride()
    torch.testing.assert_close(out, torch.softmax(x.t(), -1))
    source = jfn.func.__fusebench_source__
    assert ".contiguous()" in source and "_computation_0(" not in source, source


def test_a_returned_complex_value_is_made_inline_too() -> None:
    jfn = compiler.jit(lambda z: z * 2)
    z = torch.randn(3, dtype=torch.complex64)
    for _ in range(2):
        out = jfn(z)
    assert out.dtype == torch.complex64
    torch.testing.assert_close(out, z * 2)
    assert "_computation_0(" not in jfn.func.__fusebench_source__
