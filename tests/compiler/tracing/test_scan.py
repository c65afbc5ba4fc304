"""`associative_scan` while tracing (tracing/scan.py): a log-depth prefix scan of the combine
function over proxies gives torch's scan (and a sequential loop's) on every length, forward and
reversed, over a tensor or a tuple of tensors; torch's own function is back after tracing."""

from __future__ import annotations

import sys

import pytest
import torch
from torch._higher_order_ops.associative_scan import associative_scan as torch_scan

import compiler


def _linear_recurrence(left: tuple, right: tuple) -> tuple:
    """Mamba's combine: h_i = a_i * h_{i-1} + b_i as pairs (a, b)."""
    return left[0] * right[0], right[0] * left[1] + right[1]


def _sequential(combine, leaves: tuple, dim: int, reverse: bool) -> tuple:
    length = leaves[0].shape[dim]
    order = range(length - 1, -1, -1) if reverse else range(length)
    running, outputs = None, {}
    for index in order:
        current = tuple(leaf.select(dim, index) for leaf in leaves)
        running = current if running is None else combine(running, current)
        outputs[index] = running
    return tuple(torch.stack([outputs[i][k] for i in range(length)], dim) for k in range(len(leaves)))


def _scan_pairs(a: torch.Tensor, b: torch.Tensor, dim: int, reverse: bool) -> tuple:
    from torch._higher_order_ops.associative_scan import associative_scan  # as transformers imports it

    return associative_scan(_linear_recurrence, (a, b), dim=dim, reverse=reverse, combine_mode="generic")


@pytest.mark.parametrize("length", [1, 2, 5, 8, 13])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_a_traced_scan_of_pairs_matches_torch_and_a_loop(length: int, reverse: bool, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    a = torch.rand(2, 3, length, 4, generator=generator) + 0.5
    b = torch.randn(2, 3, length, 4, generator=generator)
    got = compiler.jit(_scan_pairs)(a, b, 2, reverse)
    torch.testing.assert_close(got, _sequential(_linear_recurrence, (a, b), 2, reverse))
    torch.testing.assert_close(
        got, torch_scan(_linear_recurrence, (a, b), dim=2, reverse=reverse, combine_mode="generic")
    )


def test_a_single_tensor_scanned_along_a_negative_dim_is_a_cumulative_sum() -> None:
    def cumulative(x: torch.Tensor) -> torch.Tensor:
        from torch._higher_order_ops.associative_scan import associative_scan

        return associative_scan(torch.add, x, dim=-1, combine_mode="generic")

    x = torch.randn(3, 7)
    jitted = compiler.jit(cumulative)
    torch.testing.assert_close(jitted(x), x.cumsum(-1))
    # the combine is traced once per doubling of the offset: 3 adds for 7 positions
    assert str(compiler.last_traces(jitted)[0]).count("torch.add(") == 3


def test_xs_of_different_shapes_are_refused_with_their_shapes() -> None:
    def uneven(a: torch.Tensor, b: torch.Tensor) -> tuple:
        from torch._higher_order_ops.associative_scan import associative_scan

        return associative_scan(_linear_recurrence, (a, b), dim=0, combine_mode="generic")

    with pytest.raises(ValueError, match=r"associative_scan's xs must have one shape; got \[\(3, 2\), \(3, 1\)\]"):
        compiler.jit(uneven)(torch.rand(3, 2), torch.rand(3, 1))


def test_torchs_own_scan_is_back_after_tracing() -> None:
    module = sys.modules["torch._higher_order_ops.associative_scan"]
    before = module.associative_scan
    compiler.jit(_scan_pairs)(torch.rand(1, 1, 3, 1), torch.rand(1, 1, 3, 1), 2, False)
    assert module.associative_scan is before
