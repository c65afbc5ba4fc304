"""A dict that is a dataclass of fields (transformers' `ModelOutput`, the `encoder_outputs` that
`generate()` passes an encoder-decoder's forward) as an argument of a jitted function: read by item,
index and attribute as eager reads it, a field that turns None or not compiles its own entry, and a
field the function sets is written back onto the caller's object."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import pytest
import torch

import compiler


@dataclass
class Output(OrderedDict):
    """ModelOutput's contract in a few lines: the fields that are not None are also its items."""

    hidden: torch.Tensor | None = None
    extra: torch.Tensor | None = None

    def __post_init__(self) -> None:
        for name in ("hidden", "extra"):
            if getattr(self, name) is not None:
                self[name] = getattr(self, name)

    def __setattr__(self, name: str, value: object) -> None:
        if value is not None and name in ("hidden", "extra"):
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def to_tuple(self) -> tuple:
        return tuple(self[k] for k in self.keys())


def _reads(output: Output, x: torch.Tensor) -> torch.Tensor:
    y = output.to_tuple()[0] * x + output["hidden"].sin()
    if output.extra is not None:
        y = y + output.extra.sum()
    return y * len(output)


@pytest.mark.parametrize("seed", [0, 1])
def test_items_index_and_attributes_read_as_in_eager(seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    hidden, extra, x = (torch.randn(3, 4, generator=generator) for _ in range(3))
    jitted = compiler.jit(_reads)
    for output in (Output(hidden=hidden), Output(hidden=hidden, extra=extra), Output(hidden=hidden * 2)):
        torch.testing.assert_close(jitted(output, x), _reads(output, x))
    assert compiler.cache_stats(jitted).misses == 2  # a field None or not: one entry each


def test_a_field_the_function_sets_is_written_back() -> None:
    def sets(output: Output) -> torch.Tensor:
        output.extra = output.hidden * 3
        return output.hidden + 1

    hidden = torch.randn(2, 5)
    output = Output(hidden=hidden)
    result = compiler.jit(sets)(output)
    torch.testing.assert_close(result, hidden + 1)
    torch.testing.assert_close(output.extra, hidden * 3)
    assert list(output) == ["hidden", "extra"] and output["extra"] is output.extra
