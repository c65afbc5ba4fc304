"""The CPU stand-in for nvfuser_direct (compiler/executors/nvfuser/diagnose/fake_nvfuser.py): ops
that model what nvFuser accepts, not only what torch computes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from compiler.executors.nvfuser.diagnose import fake_nvfuser as fake


def _run(build, *inputs: torch.Tensor) -> torch.Tensor:
    with fake.FusionDefinition() as fd:
        order = lambda x: list(range(x.dim()))[::-1]  # row-major
        tensors = [fd.define_tensor([-1] * x.dim(), [True] * x.dim(), x.dtype, order(x)) for x in inputs]
        fd.add_output(build(fd, *tensors))
    return fd.execute(list(inputs))[0]


def test_squeeze_of_a_size_one_dim_matches_torch_and_of_another_size_is_refused_as_nvfuser_refuses_it():
    x = torch.randn(3, 1, 4)
    torch.testing.assert_close(_run(lambda fd, t: fd.ops.squeeze(t, dims=[1]), x), x.squeeze(1))
    with pytest.raises(RuntimeError, match=r"squeeze: dims \[2\] of a tensor of shape \(3, 1, 4\) are not of size 1"):
        _run(lambda fd, t: fd.ops.squeeze(t, dims=[1, 2]), x)


@pytest.mark.parametrize("widths", [[1, 0], [0, 2], [0, 0, 1, 1], [2, 1, 0, 3]])
def test_pad_matches_torch_pad(widths):
    x = torch.randn(2, 3, 4)
    value = -1.5
    got = _run(lambda fd, t: fd.ops.pad(t, widths, fd.define_scalar(value, dtype=torch.float32)), x)
    torch.testing.assert_close(got, F.pad(x, widths, value=value))
