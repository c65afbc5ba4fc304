"""eager's layouts under symbolic sizes (compiler/ops/eager_strides.py): a row-major tensor is known
row-major whatever its sizes, so its reshapes are views that writes go through as in eager, and
`is_contiguous()` answers, without an entry per size. (An argument of symbolic size has strides
that change with it: its layout is not known, nor that of what is computed elementwise from it.)"""

from __future__ import annotations

import pytest
import torch

import compiler
from compiler.core.ir import BoundSymbol, NumberProxy, TensorProxy
from compiler.ops.eager_strides import ROW_MAJOR, layout_of
from compiler.prims import Prim

SIZES = (4, 6, 9)


def _entries_over_sizes(fn, make) -> int:
    """Calls the jitted `fn` (automatic dynamic) at each of SIZES against eager; its cache entries."""
    jitted = compiler.jit(fn)
    for size in SIZES:
        for seed in (0, 1):
            torch.manual_seed(seed)
            args = make(size)
            expected = fn(*[a.clone() for a in args])
            torch.testing.assert_close(jitted(*args), expected)
    return len(jitted.entries)


def _mlp_then_residual(x: torch.Tensor, w: torch.Tensor, attention: torch.Tensor) -> tuple:
    # Falcon's parallel block: the MLP's output (`input @ weight.T`, a matmul reshaped back to 3-d)
    # is added to in place
    out = x @ w.T
    out += attention
    return out, out.sum()


def _bias_first_then_view(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    h = bias + (x @ w).exp()  # the broadcast bias first: the row-major operand still decides the layout
    flat = h.reshape(-1)
    flat.mul_(2)
    return h


def _contiguous_question(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = x @ w
    return h.view(-1) * 2 if h.is_contiguous() else h.reshape(-1)


@pytest.mark.parametrize(
    ("fn", "make"),
    [
        (_mlp_then_residual, lambda n: (torch.randn(2, n, 8), torch.randn(16, 8), torch.randn(2, n, 16))),
        (_bias_first_then_view, lambda n: (torch.randn(n, 1, 3), torch.randn(3, 5), torch.randn(5))),
        (_contiguous_question, lambda n: (torch.randn(n, 3), torch.randn(3, 7))),
    ],
    ids=["write_into_reshaped_matmul", "broadcast_bias_first", "is_contiguous"],
)
def test_a_row_major_tensor_of_symbolic_size_reshapes_as_a_view_with_two_entries(fn, make) -> None:
    assert _entries_over_sizes(fn, make) == 2


def test_a_write_through_a_reshape_of_a_transposed_tensor_still_matches_eager() -> None:
    # the layout of a transpose is not row-major: unknown under symbolic sizes, so the size stays
    # constant (an entry per size) rather than risk a view eager would not make
    def fn(x):
        t = (x * 2).t()
        flat = t.reshape(-1)
        flat.add_(1)
        return t, flat

    assert _entries_over_sizes(fn, lambda n: (torch.randn(n, 3),)) == len(SIZES)


def test_layout_of_keeps_row_major_through_elementwise_reshape_and_unsqueeze_only() -> None:
    n = NumberProxy(int, 8, name="n")
    cpu, f32 = torch.device("cpu"), torch.float32
    a = TensorProxy((n, 4), f32, cpu, name="a")
    out = TensorProxy((n, 4), f32, cpu, name="out")
    exp = BoundSymbol(Prim.EXP, (a,), {}, out)
    assert layout_of(exp, out, [(a, ROW_MAJOR)]) is ROW_MAJOR
    assert layout_of(exp, out, [(a, None)]) is None
    wide = TensorProxy((1, n, 4), f32, cpu, name="wide")
    unsqueeze = BoundSymbol(Prim.BROADCAST_IN_DIM, (a, (1, n, 4), (1, 2)), {}, wide)
    assert layout_of(unsqueeze, wide, [(a, ROW_MAJOR)]) is ROW_MAJOR
    swapped = TensorProxy((4, n), f32, cpu, name="swapped")
    permute = BoundSymbol(Prim.PERMUTE, (a, (1, 0)), {}, swapped)
    assert layout_of(permute, swapped, [(a, ROW_MAJOR)]) is None
    total = TensorProxy((4,), f32, cpu, name="total")
    reduction = BoundSymbol(Prim.SUM, (a, (0,)), {}, total)
    assert layout_of(reduction, total, [(a, None)]) == (1,)
