"""Tensors whose values are known while tracing (compiler/ops/known_values.py): `torch.tensor` of
Python numbers and what ops compute from them alone may be used as Python numbers (DeBERTa's
attention span as a slice bound); a write into one, or a random draw, leaves its value unknown and
using it as a number is refused with one line."""

from __future__ import annotations

import pytest
import torch

import compiler
from compiler.core.errors import TracingError


def _span_slices(x: torch.Tensor) -> tuple:
    span = torch.tensor(min(max(x.size(-2), 2), 6))  # DeBERTa's compute_attention_span
    rows = x[8 - span : 8 + span - 4]
    unrelated = x.clone()
    unrelated.mul_(2)  # a write into another tensor keeps the span known
    return rows, int(span * 2 - 1), (span > 2).item(), float(span / 4), torch.clamp(x, 0, span * 2 - 1) * unrelated


@pytest.mark.parametrize("rows", [3, 5])
def test_a_tensor_of_python_numbers_serves_as_a_number(rows: int) -> None:
    x = torch.randn(rows, 4)
    jitted = compiler.jit(_span_slices)
    for got, expected in zip(jitted(x), _span_slices(x), strict=True):
        if isinstance(expected, torch.Tensor):
            torch.testing.assert_close(got, expected)
        else:
            assert got == expected and type(got) is type(expected)
    jitted(torch.randn(rows, 4))
    assert compiler.cache_stats(jitted).misses == 1


def _written_through_a_view(x: torch.Tensor) -> torch.Tensor:
    bounds = torch.tensor([1, 3])
    bounds[0:1].add_(1)  # eager's bounds are now [2, 3]: the value kept while tracing would be stale
    return x[: int(bounds[0])]


def _written_as_out(x: torch.Tensor) -> torch.Tensor:
    bounds = torch.tensor([1, 3])
    torch.add(bounds, 1, out=bounds)
    return x[: int(bounds[0])]


def _drawn(x: torch.Tensor) -> torch.Tensor:
    noise = torch.rand_like(torch.tensor([1.0, 2.0]))  # its values are drawn when the program runs
    return x[: int(noise[0] * 3)]


@pytest.mark.parametrize("fn", [_written_through_a_view, _written_as_out, _drawn], ids=["written", "out", "random"])
def test_a_value_that_may_change_is_refused_in_one_line(fn) -> None:
    with pytest.raises(TracingError) as raised:
        compiler.jit(fn)(torch.randn(4, 3))
    message = str(raised.value)
    assert "\n" not in message and message.startswith("int(tensor) needs the value of a tensor"), message
    assert "test_known_values.py:" in message


def test_a_random_draw_from_known_values_is_not_drawn_while_tracing() -> None:
    fn = lambda x: x + torch.rand_like(torch.tensor([1.0, 2.0, 3.0]))
    x = torch.randn(3)
    torch.manual_seed(0)
    got = compiler.jit(fn)(x)
    torch.manual_seed(0)
    torch.testing.assert_close(got, fn(x), atol=0, rtol=0)
