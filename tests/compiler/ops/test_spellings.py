"""Spellings users write that reach the same ops: unary plus and `positive`, `.real`, `.mH` and
`.H` of real tensors, `broadcast_to` with its sizes as separate arguments or by keyword."""

from __future__ import annotations

import pytest
import torch

import compiler

SPELLINGS = {
    "unary_plus": lambda t: +t * 2,
    "positive": lambda t: torch.positive(t) - t.positive(),
    "real": lambda t: t.real * 3,
    "mH": lambda t: t.mH @ t,
    "H": lambda t: t.H + 1,
    "broadcast_to_sizes": lambda t: t[0].broadcast_to(2, 4) + t[:2],
    "broadcast_to_keyword": lambda t: torch.broadcast_to(t[:, :1], size=(3, 4)) * t,
}


@pytest.mark.parametrize("spelling", SPELLINGS, ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_each_spelling_matches_eager(spelling: str, layout: str) -> None:
    fn = SPELLINGS[spelling]
    x = torch.randn(3, 4) if layout == "contiguous" else torch.randn(4, 3).t()
    torch.testing.assert_close(compiler.jit(fn)(x), fn(x))


def test_unary_plus_of_a_bool_tensor_raises_as_eager() -> None:
    mask = torch.rand(3) > 0.5
    with pytest.raises(RuntimeError, match="The `\\+` operator, on a bool tensor is not supported"):
        compiler.jit(lambda m: +m)(mask)
