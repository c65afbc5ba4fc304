"""Shape ops written with other ops (compiler/ops/shape_compositions.py): hsplit / vsplit / dsplit
against eager (int and list forms, the Tensor methods, views of the input), and their errors."""

from __future__ import annotations

import pytest
import torch

import compiler

_SPLITS = {
    "hsplit int": lambda t: torch.hsplit(t, 3),
    "hsplit list": lambda t: t.hsplit([1, -2, 9]),
    "hsplit 1-d": lambda t: torch.hsplit(t[0, :, 0], 2),
    "vsplit int": lambda t: t.vsplit(2),
    "vsplit list": lambda t: torch.vsplit(t.mT, [2]),
    "dsplit int": lambda t: torch.dsplit(t, 1),
    "dsplit list": lambda t: t[:, 1:].dsplit([0, 1]),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
@pytest.mark.parametrize("name", sorted(_SPLITS))
def test_splits_match_eager_and_share_the_input_memory(name: str, dtype: torch.dtype) -> None:
    fn = _SPLITS[name]
    t = torch.arange(4 * 6 * 2).reshape(4, 6, 2).to(dtype)
    got, want = compiler.jit(lambda t: [p * 1 for p in fn(t)])(t), fn(t)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        torch.testing.assert_close(g, w)


def test_split_gradients_match_eager() -> None:
    x = torch.randn(4, 6, 2, requires_grad=True)
    fn = lambda x: sum(p.sum((1, 2)) * (i + 1) for i, p in enumerate(torch.hsplit(x, [2, 3])))
    got, want = torch.autograd.grad(compiler.jit(fn)(x).sum(), x)[0], torch.autograd.grad(fn(x).sum(), x)[0]
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize(
    ("fn", "shape", "message"),
    [
        (lambda t: torch.hsplit(t, 4), (4, 6), "hsplit attempted to split along dimension 1, but the size"),
        (lambda t: torch.vsplit(t, 2), (4,), "vsplit requires a tensor with at least 2 dimension"),
        (lambda t: torch.dsplit(t, 2), (4, 6), "dsplit requires a tensor with at least 3 dimension"),
    ],
)
def test_split_errors_match_eager(fn, shape: tuple, message: str) -> None:
    with pytest.raises(RuntimeError, match=f"{message}.*called at"):  # raised while tracing, naming the line
        compiler.jit(fn)(torch.randn(shape))
    with pytest.raises(RuntimeError, match=message):
        fn(torch.randn(shape))
