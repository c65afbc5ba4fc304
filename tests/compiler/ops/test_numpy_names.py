"""NumPy's parameter names, which torch's argument parser accepts for torch's (`axis` for `dim`,
`keepdims` for `keepdim`), reach the decompositions with torch's names."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import compiler

CASES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "cat_axis": lambda x: torch.cat([x, x * 2], axis=1),
    "sum_axis_keepdims": lambda x: x.sum(axis=0, keepdims=True),
    "amax_axis_keepdims": lambda x: torch.amax(x, axis=-1, keepdims=True),
    "softmax_axis": lambda x: torch.softmax(x, axis=1),
    "max_axis": lambda x: torch.max(x, axis=1).values,
    "std_axis": lambda x: x.std(axis=1),
}


@pytest.mark.parametrize("name", CASES)
def test_numpy_names_match_eager(name: str) -> None:
    fn = CASES[name]
    for seed, shape in enumerate([(3, 4), (1, 5), (2, 2)]):
        x = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
        torch.testing.assert_close(compiler.jit(fn)(x), fn(x))


def test_a_parameter_given_under_both_names_is_refused() -> None:
    # NOTE: a method of a traced tensor reaches the decomposition without torch's argument parser
    with pytest.raises(TypeError, match=r"dim given twice \(also as axis=\)"):
        compiler.jit(lambda x: (x * 2).sum(dim=0, axis=1))(torch.randn(2, 3))
