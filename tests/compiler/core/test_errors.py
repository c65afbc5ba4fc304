"""Error messages name the bad input, what was expected, and the user's line of code."""

from __future__ import annotations

import types

import pytest
import torch

import compiler

HOLDER = types.SimpleNamespace(table=torch.ones(3))


def test_unsupported_function_names_itself_and_the_calling_line() -> None:
    def f(x):
        return torch.linalg.eigh(x * x).eigenvalues

    with pytest.raises(NotImplementedError) as info:
        compiler.jit(f)(torch.randn(4, 4))
    message = str(info.value)
    assert "torch.linalg.eigh is not supported" in message
    assert "test_errors.py" in message and "return torch.linalg.eigh(x * x).eigenvalues" in message


def test_control_flow_on_tensor_values_explains_why() -> None:
    def f(x):
        if x.max() > 0:
            return x
        return -x

    def g(x):
        return x * 2 if bool(x[0]) else x

    for fn in (f, g):
        with pytest.raises((compiler.TracingError, NotImplementedError)) as info:
            compiler.jit(fn)(torch.randn(4))
        if isinstance(info.value, compiler.TracingError):
            assert "control flow" in str(info.value) and "torch.where" in str(info.value)
    with pytest.raises(compiler.TracingError, match=r"tensor.item\(\) needs the value of a tensor"):
        compiler.jit(lambda x: x * x.item())(torch.randn(1))


def test_captured_tensor_without_a_place_is_rejected_with_advice() -> None:
    # NOTE: a global tensor is an input (tests/compiler/tracing/test_captured_tensors.py); one held by
    # an object the program reaches through a global has no place the tracer follows
    with pytest.raises(compiler.TracingError, match="not an argument of the jitted function"):
        compiler.jit(lambda x: x + HOLDER.table)(torch.randn(3))


def test_an_argument_of_an_unsupported_type_is_named() -> None:
    # NOTE: jit's own options and the inspection functions: tests/compiler/test_api_errors.py
    with pytest.raises(TypeError, match="argument obj of type object is not supported"):
        compiler.jit(lambda x, obj: x)(torch.randn(1), object())


def test_shape_errors_name_the_shapes() -> None:
    with pytest.raises(ValueError, match=r"do not broadcast: size 4 against 3"):
        compiler.jit(lambda x, y: x + y)(torch.randn(2, 3), torch.randn(2, 4))
    with pytest.raises(
        IndexError,
        match=r"dim 5 is out of range for inserting a dim into a tensor of rank 2 \(expected an int in \[-3, 2\]\)",
    ):
        compiler.jit(lambda x: x.unsqueeze(5))(torch.randn(2, 3))
