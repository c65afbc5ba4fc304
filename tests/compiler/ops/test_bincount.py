"""torch.bincount: its length is max(input) + 1, which only the values give. Without `minlength` it is
refused with one line naming the op and the program's line; with it, the trace has `minlength` bins,
and a value at or above that (eager would return more bins) is an error at run time, never a
silently shorter count."""

from __future__ import annotations

import inspect

import pytest
import torch

import compiler


def _counts(x: torch.Tensor) -> torch.Tensor:
    y = x + 0
    return torch.bincount(y)


def _expert_counts(x: torch.Tensor) -> torch.Tensor:
    return x.bincount(minlength=8)


def test_without_minlength_it_is_refused_naming_the_op_and_the_line() -> None:
    with pytest.raises(NotImplementedError) as info:
        compiler.jit(_counts)(torch.tensor([1, 0, 3]))
    message = str(info.value)
    lines, first = inspect.getsourcelines(_counts)
    line = first + next(i for i, text in enumerate(lines) if "torch.bincount" in text)
    assert "torch.bincount" in message and "minlength" in message, message
    assert f"{__file__}:{line}:" in message, message
    assert "\n" not in message.strip(), message


def test_with_minlength_it_counts_as_eager() -> None:
    jitted = compiler.jit(_expert_counts)
    for seed in range(3):
        x = torch.randint(0, 8, (64,), generator=torch.Generator().manual_seed(seed))
        torch.testing.assert_close(jitted(x), _expert_counts(x))


@pytest.mark.parametrize("value", [8, 11, -1])
def test_a_value_outside_the_bins_is_an_error_at_run_time(value: int) -> None:
    x = torch.tensor([0, 3, value, 2])
    with pytest.raises((IndexError, RuntimeError)):
        compiler.jit(_expert_counts)(x)
