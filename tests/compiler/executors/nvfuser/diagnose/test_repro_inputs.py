"""A repro script's random inputs have the recorded layouts, expanded and overlapping ones included."""

import pytest
import torch

from compiler.executors.nvfuser.diagnose.repro import input_source

LAYOUTS = [
    ((2, 3, 4), (12, 4, 1)),  # dense
    ((8, 12, 5, 4), (0, 0, 4, 1)),  # expanded batch and head dims (a broadcast attention mask)
    ((3, 4), (1, 3)),  # transposed
    ((3, 4), (8, 2)),  # gaps
    ((4, 3), (1, 1)),  # overlapping windows (unfold)
    ((0, 5), (5, 1)),  # empty
    ((1,), (0,)),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
@pytest.mark.parametrize(("shape", "stride"), LAYOUTS)
def test_an_input_is_built_with_its_recorded_layout(shape: tuple, stride: tuple, dtype: torch.dtype) -> None:
    value = eval(input_source("t0", shape, stride, dtype, "cpu", 5 if dtype is torch.int64 else None), {"torch": torch})
    assert (tuple(value.shape), value.stride(), value.dtype) == (shape, stride, dtype)
    if dtype is torch.int64 and value.numel():
        assert int(value.min()) >= 0 and int(value.max()) < 5
    if dtype.is_floating_point and value.numel() > 1:
        assert value.float().std() > 0
