"""`Tensor.repeat` and `repeat_interleave` return new row-major tensors, as eager's: `.view` of the
result works whatever the input's layout (WavLM's relative position bias), writing into it leaves
the input alone, and its strides are eager's."""

from __future__ import annotations

import pytest
import torch

import compiler


def _repeats(x: torch.Tensor) -> tuple:
    tiled = x.unsqueeze(0).repeat(2, 1, 1, 1).view(-1, x.shape[-1])
    interleaved = x.repeat_interleave(2, dim=-1)
    interleaved.mul_(2)  # a new tensor: the input is not written
    written = x.repeat(1, 2, 1)
    written.add_(1)
    return tiled, interleaved, written, x, written.stride(), interleaved.stride()


@pytest.mark.parametrize("layout", ["contiguous", "permuted", "expanded"])
def test_repeats_are_new_row_major_tensors(layout: str) -> None:
    torch.manual_seed(0)
    x = {
        "contiguous": lambda: torch.randn(4, 3, 5),
        "permuted": lambda: torch.randn(5, 4, 3).permute(1, 2, 0),
        "expanded": lambda: torch.randn(1, 3, 5).expand(4, 3, 5),
    }[layout]()
    got = compiler.jit(_repeats)(x.clone() if layout != "expanded" else x)
    expected = _repeats(x.clone() if layout != "expanded" else x)
    for index, (g, e) in enumerate(zip(got, expected, strict=True)):
        if isinstance(e, torch.Tensor):
            torch.testing.assert_close(g, e, msg=lambda m, index=index: f"output {index}: {m}")
        else:
            assert g == e, f"output {index}: {g} != {e}"
