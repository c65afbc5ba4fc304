"""Errors the ops layer raises: unsupported functions, value-dependent control flow, bad dims, bad
dtypes. Each must name what is wrong and the line of user code that did it."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import compiler


def _line_of(fn: Callable, text: str) -> str:
    """'this_file.py:N:' for the first line of `fn`'s source containing `text`."""
    lines, first = inspect.getsourcelines(fn)
    offset = next(i for i, line in enumerate(lines) if text in line)
    return f"{__file__}:{first + offset}:"


def _raises(error: type[Exception], fn: Callable, *args: Any) -> str:
    with pytest.raises(error) as info:
        compiler.jit(fn)(*args)
    return str(info.value)


# ---------------------------------------------------------------------------------------------
# Unsupported functions


def _eigh(x: torch.Tensor) -> torch.Tensor:
    y = x * 2
    return torch.linalg.eigh(y).eigenvalues


def _mode(x: torch.Tensor) -> torch.Tensor:
    return x.mode(0).values + 1


def _nanmedian(x: torch.Tensor) -> torch.Tensor:
    return x.sin().nanmedian(0).values


def test_unsupported_function_names_it_and_the_calling_line() -> None:
    message = _raises(NotImplementedError, _eigh, torch.randn(4, 4))
    assert re.search(r"torch\.linalg[._]eigh\b", message), message
    assert "not supported" in message
    assert _line_of(_eigh, "torch.linalg.eigh") in message, message


@pytest.mark.parametrize(
    ("fn", "name", "text"),
    [(_mode, "torch.Tensor.mode", "x.mode(0)"), (_nanmedian, "torch.Tensor.nanmedian", ".nanmedian(0)")],
)
def test_unsupported_method_names_it_and_the_calling_line(fn: Callable, name: str, text: str) -> None:
    message = _raises(NotImplementedError, fn, torch.randn(4, 3))
    assert name in message, message
    assert _line_of(fn, text) in message, message


# ---------------------------------------------------------------------------------------------
# Control flow on tensor values


def _branch(x: torch.Tensor) -> torch.Tensor:
    if x.sum() > 0:
        return x
    return -x


def _item(x: torch.Tensor) -> torch.Tensor:
    scale = x.amax().item()
    return x / scale


def _python_float(x: torch.Tensor) -> torch.Tensor:
    return x * float(x.mean())


@pytest.mark.parametrize(
    ("fn", "text", "what"),
    [
        (_branch, "if x.sum() > 0", "bool(tensor)"),
        (_item, ".item()", "tensor.item()"),
        (_python_float, "float(x.mean())", "float(tensor)"),
    ],
)
def test_value_dependent_control_flow_says_why(fn: Callable, text: str, what: str) -> None:
    message = _raises(compiler.TracingError, fn, torch.randn(4, 3))
    assert what in message, message
    assert "not known while tracing" in message, message
    assert _line_of(fn, text) in message, message


# ---------------------------------------------------------------------------------------------
# Bad dims: IndexError naming the dim and the rank (torch raises IndexError too)

BAD_DIMS = [
    ("sum", lambda x: x.sum(dim=2), "dim 2", "rank 2"),
    ("mean", lambda x: torch.mean(x, (0, -3)), "dim -3", "rank 2"),
    ("var", lambda x: x.var(5), "dim 5", "rank 2"),
    ("amax", lambda x: x.amax(-3), "dim -3", "rank 2"),
    ("argmax", lambda x: x.argmax(2), "dim 2", "rank 2"),
    ("sort", lambda x: x.sort(2), "dim 2", "rank 2"),
    ("flip", lambda x: x.flip(0, 2), "dim 2", "rank 2"),
    ("roll", lambda x: x.roll(1, -3), "dim -3", "rank 2"),
    ("topk", lambda x: x.topk(1, dim=-3), "dim -3", "rank 2"),
    ("max", lambda x: x.max(dim=2), "dim 2", "rank 2"),
    ("softmax", lambda x: x.softmax(-3), "dim -3", "rank 2"),
    ("log_softmax", lambda x: F.log_softmax(x, dim=2), "dim 2", "rank 2"),
    ("transpose", lambda x: x.transpose(0, 2), "dim 2", "rank 2"),
    ("unsqueeze", lambda x: x.unsqueeze(3), "dim 3", "rank 2"),
    ("stack", lambda x: torch.stack([x, x], -4), "dim -4", "rank 2"),
    ("cat", lambda x: torch.cat([x, x], 2), "dim 2", "rank 2"),
    ("squeeze", lambda x: x.squeeze(2), "dim 2", "rank 2"),
    ("flatten", lambda x: x.flatten(0, 2), "dim 2", "rank 2"),
    ("split", lambda x: x.split(2, dim=-3), "dim -3", "rank 2"),
    ("narrow", lambda x: x.narrow(2, 0, 1), "dim 2", "rank 2"),
    ("permute", lambda x: x.permute(0, 2), "dim 2", "rank 2"),
    ("gather", lambda x: x.gather(2, torch.zeros_like(x, dtype=torch.int64)), "dim 2", "rank 2"),
    ("index_select", lambda x: x.index_select(-3, x.argmax(0)), "dim -3", "rank 2"),
    ("scatter", lambda x: x.scatter(2, torch.zeros_like(x, dtype=torch.int64), x), "dim 2", "rank 2"),
    ("scatter_reduce", lambda x: x.scatter_reduce(-3, x.argmax(0, True), x, "amax"), "dim -3", "rank 2"),
    ("0-d sum", lambda x: x.sum().sum(1), "dim 1", "rank 0"),
]


@pytest.mark.parametrize(("fn", "dim", "rank"), [pytest.param(*case[1:], id=case[0]) for case in BAD_DIMS])
def test_bad_dim_raises_index_error_naming_dim_and_rank(fn: Callable, dim: str, rank: str) -> None:
    x = torch.randn(3, 4)
    with pytest.raises(IndexError):
        fn(x)  # eager agrees that the dim is bad
    message = _raises(IndexError, fn, x)
    assert dim in message and rank in message, message
    assert f"{__file__}:" in message, message


def test_a_dim_named_twice_raises_like_torch() -> None:
    x = torch.randn(3, 4)
    with pytest.raises(RuntimeError):
        x.sum((0, -2))
    message = _raises(RuntimeError, lambda x: x.sum((0, -2)), x)
    assert "(0, -2)" in message and "more than once" in message, message


# ---------------------------------------------------------------------------------------------
# Dtypes


@pytest.mark.parametrize("op", ["mean", "var", "std"])
def test_mean_var_std_of_integers_raise_like_torch(op: str) -> None:
    x = torch.arange(6).reshape(2, 3)
    fn = lambda x: getattr(x, op)(1)
    with pytest.raises(RuntimeError):
        fn(x)
    message = _raises(RuntimeError, fn, x)
    assert op in message and "torch.int64" in message and "floating" in message, message


def test_softmax_of_integers_asks_for_a_dtype() -> None:
    message = _raises(TypeError, lambda x: x.softmax(0), torch.arange(4))
    assert "softmax" in message and "torch.int64" in message and "dtype=" in message, message


def test_matmul_of_different_dtypes_names_both() -> None:
    message = _raises(TypeError, lambda a, b: a @ b, torch.randn(2, 3), torch.randn(3, 2, dtype=torch.float64))
    assert "torch.float32" in message and "torch.float64" in message, message


def test_matmul_shape_mismatch_names_the_shapes() -> None:
    message = _raises(ValueError, torch.matmul, torch.randn(2, 3), torch.randn(4, 2))
    assert "(2, 3)" in message and "(4, 2)" in message, message


def test_layer_norm_shape_mismatch_names_the_shapes() -> None:
    message = _raises(ValueError, lambda x: F.layer_norm(x, (3,)), torch.randn(3, 4))
    assert "(3,)" in message and "(3, 4)" in message, message


def test_cross_entropy_target_shape_mismatch_names_the_shapes() -> None:
    message = _raises(ValueError, F.cross_entropy, torch.randn(4, 5), torch.zeros(3, dtype=torch.int64))
    assert "(3,)" in message and "(4, 5)" in message, message


def _leaky_relu_of_integers(x: torch.Tensor) -> torch.Tensor:
    return F.leaky_relu(x + 1)


def test_activations_refuse_what_eager_refuses_naming_the_line() -> None:
    message = _raises(TypeError, _leaky_relu_of_integers, torch.arange(4))
    assert "leaky_relu" in message and "torch.int64" in message, message
    assert _line_of(_leaky_relu_of_integers, "F.leaky_relu") in message, message
    for fn in (F.relu6, F.hardtanh, lambda x: F.threshold(x, 0, 1)):
        message = _raises(TypeError, fn, torch.tensor([True, False]))
        assert "bool" in message, message
    with pytest.raises(ValueError, match="min_val cannot be greater than max_val"):
        F.hardtanh(torch.randn(3), 2.0, 1.0)
    message = _raises(ValueError, lambda x: F.hardtanh(x, 2.0, 1.0, inplace=True), torch.randn(3))
    assert "min_val cannot be greater than max_val" in message, message
    with pytest.raises(RuntimeError, match="without overflow"):
        F.threshold(torch.arange(3), float("nan"), 1.0)
    message = _raises(RuntimeError, lambda x: F.threshold(x, float("nan"), 1.0), torch.arange(3))
    assert "threshold" in message and "without overflow" in message, message


@pytest.mark.parametrize("mode", ["bicubic", "area", "trilinear"])
def test_interpolate_in_a_mode_it_does_not_resize_with_names_the_mode(mode: str) -> None:
    x = torch.randn(1, 1, 4, 4, 4) if mode == "trilinear" else torch.randn(1, 1, 4, 4)
    message = _raises(NotImplementedError, lambda x: F.interpolate(x, scale_factor=2, mode=mode), x)
    assert f"mode={mode!r}" in message and "nearest" in message, message


# ---------------------------------------------------------------------------------------------
# Error types a program catches


def _first_that_fits(x: torch.Tensor, w: torch.Tensor, weights: list[torch.Tensor]) -> torch.Tensor:
    # a program trying layouts until one fits, catching the error eager raises (RuntimeError)
    for candidate in weights:
        try:
            return x @ candidate + F.conv1d(x.unsqueeze(0), w).sum()
        except RuntimeError:
            w = w[:, : x.shape[0]]
    raise AssertionError("nothing fitted")


def test_a_program_catching_eagers_runtime_error_catches_the_traced_ops_errors() -> None:
    x, w = torch.randn(3, 4), torch.randn(2, 5, 1)
    weights = [torch.randn(5, 2), torch.randn(4, 2)]  # the first does not fit: matmul, then conv
    torch.testing.assert_close(compiler.jit(_first_that_fits)(x, w, weights), _first_that_fits(x, w, weights))


@pytest.mark.parametrize(
    ("fn", "args", "kind"),
    [
        (lambda a, b: a @ b, (torch.randn(2, 3), torch.randn(4, 5)), ValueError),
        (lambda a, b: torch.cat([a, b]), (torch.randn(2, 3), torch.randn(2, 4)), ValueError),
        (lambda a, b: a + b, (torch.randn(2, 3), torch.randn(4)), ValueError),
        (lambda a, b: a.view(5), (torch.randn(2, 3), None), ValueError),
        (lambda a, b: F.conv2d(a, b), (torch.randn(1, 3, 8, 8), torch.randn(4, 2, 3, 3)), ValueError),
        (lambda a, b: F.embedding(a, b), (torch.randn(2, 3), torch.randn(4, 5)), TypeError),
    ],
)
def test_argument_errors_eager_raises_as_runtime_errors_are_runtime_errors_too(fn, args, kind) -> None:
    with pytest.raises(RuntimeError):
        fn(*args)
    with pytest.raises(RuntimeError) as info:
        compiler.jit(fn)(*args)
    assert isinstance(info.value, kind), type(info.value)  # and still what the compiler documents


def _sum_of_grads(params: list[torch.Tensor]) -> torch.Tensor:
    return sum(p.grad.sum() for p in params)


def test_reading_a_traced_tensors_grad_says_to_pass_gradients_as_arguments() -> None:
    p = torch.randn(3, requires_grad=True)
    p.grad = torch.ones(3)
    message = _raises(AttributeError, _sum_of_grads, [p])
    assert "tensor.grad of the traced tensor" in message and "pass them to the function as arguments" in message
    assert _line_of(_sum_of_grads, "p.grad.sum()") in message
    # still an AttributeError: a default for a missing attribute works as it did
    jfn = compiler.jit(lambda x: x * 2 if getattr(x, "grad_fn", None) is None else x)
    torch.testing.assert_close(jfn(torch.ones(2)), torch.full((2,), 2.0))


def test_compiling_an_optimizers_step_names_the_gradient_read() -> None:
    # torch.optim's step reads .grad of the parameters it holds (tensors the program captured)
    model = torch.nn.Linear(4, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.randn(2, 4)).sum().backward()
    with pytest.raises(NotImplementedError, match=r"reading tensor\.grad is not supported .*pass them to the function"):
        compiler.jit(optimizer.step)()
