"""Patterns users write that the compiler deliberately does not support: each raises one line
naming the operation and the user's line of code (the convention of tests/compiler/ops/test_op_errors.py)."""

from __future__ import annotations

import inspect
from collections.abc import Callable

import pytest
import torch

import compiler
from compiler.core.errors import TracingError


def _line_of(fn: Callable, text: str) -> str:
    """'this_file.py:N:' for the first line of `fn`'s source containing `text`."""
    lines, first = inspect.getsourcelines(fn)
    offset = next(i for i, line in enumerate(lines) if text in line)
    return f"{__file__}:{first + offset}:"


def view_as_other_dtype(x):
    return x.view(torch.int32) & 0x7FFFFFFF


def write_through_as_strided(x):
    h = x.clone()
    h.as_strided((x.shape[0], 2), (x.stride(0), 1)).zero_()
    return h


def write_through_unfold(x):
    h = x.clone()
    h.unfold(-1, 2, 2).zero_()
    return h


def view_of_transposed(x):
    return x.t().view(-1)


def in_place_unsqueeze(x):
    h = x.clone()
    h.unsqueeze_(0)
    return h


def reads_requires_grad(x):
    y = x * 2
    return y if y.requires_grad else x


def bool_mask_selection_reduced(x):
    return x[x > 0].mean()


def repeat_interleave_by_counts(x):
    counts = (x[:, 0] > 0).long() + 1
    return x.repeat_interleave(counts, dim=0)


def scale_by_item(x):
    return x / x.abs().max().item()


def branch_on_tensor(x):
    if (x > 0).any():
        return x * 2
    return x


def where_with_only_a_condition(x):
    rows, cols = torch.where(x > 0)
    return x[rows, cols]


def sample_next_token(x):
    return torch.multinomial(x.softmax(-1), 1)


def tensor_method_called_on_the_class(x):
    return torch.Tensor.float(x.half()) * 2


CASES = [
    (view_as_other_dtype, "x.view(torch.int32)", NotImplementedError, "Tensor.view(dtype) reinterprets bits"),
    (write_through_as_strided, "h.as_strided(", NotImplementedError, "made by as_strided"),
    (write_through_unfold, "h.unfold(", NotImplementedError, "made by unfold"),
    (view_of_transposed, "x.t().view(-1)", RuntimeError, "view size is not compatible with input tensor's size"),
    (in_place_unsqueeze, "h.unsqueeze_(0)", NotImplementedError, "torch.Tensor.unsqueeze_ is not supported"),
    (reads_requires_grad, "y.requires_grad", AttributeError, "reading requires_grad of the traced tensor"),
    (bool_mask_selection_reduced, "x[x > 0]", NotImplementedError, "indexing with a bool mask is not supported"),
    (repeat_interleave_by_counts, "x.repeat_interleave(", NotImplementedError, "a tensor of repeats is not supported"),
    (scale_by_item, ".item()", TracingError, "tensor.item() needs the value of a tensor"),
    (branch_on_tensor, "if (x > 0).any()", TracingError, "bool(tensor) (an `if` or `while` on a tensor)"),
    (
        where_with_only_a_condition,
        "torch.where(x > 0)",
        NotImplementedError,
        "torch.where(condition) with one argument",
    ),
    (sample_next_token, "torch.multinomial(", NotImplementedError, "torch.multinomial is not supported"),
    (tensor_method_called_on_the_class, "torch.Tensor.float(", NotImplementedError, "write x.float(...)"),
]


@pytest.mark.parametrize(("fn", "text", "error", "expected"), CASES, ids=lambda v: getattr(v, "__name__", ""))
def test_unsupported_pattern_is_one_line_naming_the_op_and_the_line(
    fn: Callable, text: str, error: type[Exception], expected: str
) -> None:
    x = torch.randn(3, 4)
    with pytest.raises(error) as raised:
        compiler.jit(fn)(x)
    message = str(raised.value)
    assert expected in message, message
    assert _line_of(fn, text) in message, message
    assert "\n" not in message


def test_eager_rejects_what_the_compiler_rejects_as_a_view_error() -> None:
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        view_of_transposed(torch.randn(4, 4))
