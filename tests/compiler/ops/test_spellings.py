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


# In-place forms of the spellings (compiler/ops/spellings.py registers torch.negative_ and torch.fix_;
# the Tensor methods are in-place twins, compiler/ops/inplace.py): the input and views of it are written.
IN_PLACE_SPELLINGS = {
    "torch.negative_": lambda t: torch.negative_(t),
    "torch.fix_": lambda t: torch.fix_(t.mul_(3)),
    "Tensor.negative_": lambda t: t.negative_(),
    "Tensor.fix_": lambda t: t.mul_(3).fix_(),
    "Tensor.absolute_": lambda t: t.absolute_(),
    "Tensor.multiply_": lambda t: t.multiply_(t.flip(0)),
    "Tensor.subtract_": lambda t: t.subtract_(0.5, alpha=2),
    "Tensor.divide_": lambda t: t.divide_(3.0, rounding_mode="floor"),
}


@pytest.mark.parametrize("spelling", IN_PLACE_SPELLINGS, ids=str)
def test_in_place_spelling_matches_eager(spelling: str) -> None:
    call = IN_PLACE_SPELLINGS[spelling]

    def fn(x):
        row = x[1]
        result = call(x)
        assert result is x
        return row * 1

    x = torch.randn(3, 4)
    eager, jitted = x.clone(), x.clone()
    torch.testing.assert_close(compiler.jit(fn)(jitted), fn(eager), rtol=0, atol=0)
    torch.testing.assert_close(jitted, eager, rtol=0, atol=0)


def test_special_round_of_integers_raises_as_eager() -> None:
    x = torch.arange(4)
    with pytest.raises(NotImplementedError, match="not implemented for"):
        torch.special.round(x)
    with pytest.raises(NotImplementedError, match=r"torch\.special\.round: \"round\" is not implemented"):
        compiler.jit(lambda x: torch.special.round(x))(x)


def test_sum_to_size_of_its_own_size_is_the_input() -> None:
    """As in eager, sum_to_size to the tensor's size returns the tensor: a write into it writes the input."""

    def fn(x):
        x.sum_to_size(3, 4).mul_(2)
        return x.sum_to_size(1, 4)

    x = torch.randn(3, 4)
    eager, jitted = x.clone(), x.clone()
    torch.testing.assert_close(compiler.jit(fn)(jitted), fn(eager))
    torch.testing.assert_close(jitted, eager)


def test_sum_to_size_to_a_size_that_does_not_expand_raises_as_eager() -> None:
    x = torch.randn(3, 4)
    for size in ((2, 4), (3, 4, 1), (3,)):
        with pytest.raises(RuntimeError, match="is not expandable to size"):
            x.sum_to_size(size)
        with pytest.raises(RuntimeError, match="is not expandable to size"):
            compiler.jit(lambda x, size=size: x.sum_to_size(size))(x)


def test_vecdot_of_two_dtypes_raises_as_eager() -> None:
    x, y = torch.randn(3, 4), torch.randn(3, 4, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="Expected x and y to have the same dtype"):
        torch.linalg.vecdot(x, y)
    with pytest.raises(RuntimeError, match="Expected x and y to have the same dtype"):
        compiler.jit(torch.linalg.vecdot)(x, y)
