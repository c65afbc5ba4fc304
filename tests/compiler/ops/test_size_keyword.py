"""Factories take their sizes as the `size=` keyword too, as torch's parser does
(`torch.zeros(size=(2, 3))`, `x.new_ones(size=x.size())`: Data2Vec-Vision, Longformer)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import compiler

CASES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "zeros": lambda x: x + torch.zeros(size=(x.shape[0], 1)),
    "ones": lambda x: x * torch.ones(size=x.shape),
    "empty": lambda x: torch.empty(size=x.shape).shape[0] + x,
    "new_ones": lambda x: x.new_ones(size=x.size()) - x,
    "new_zeros": lambda x: x.new_zeros(size=(2,) + tuple(x.shape)) + x,
    "new_empty": lambda x: x.new_empty(size=[1, 1]).fill_(2.0) * x,
    "rand_shape": lambda x: x + 0 * torch.rand(size=x.shape),
}


@pytest.mark.parametrize("name", CASES)
def test_size_keyword_matches_eager(name: str) -> None:
    fn = CASES[name]
    for shape in [(3, 4), (1, 2)]:
        x = torch.randn(shape)
        torch.testing.assert_close(compiler.jit(fn)(x), fn(x))


def test_sizes_given_twice_are_refused() -> None:
    # NOTE: a method of a traced tensor reaches the decomposition without torch's argument parser
    with pytest.raises(TypeError, match=r"size given both positionally and as size="):
        compiler.jit(lambda x: x.new_zeros(2, size=(3,)))(torch.randn(2))
