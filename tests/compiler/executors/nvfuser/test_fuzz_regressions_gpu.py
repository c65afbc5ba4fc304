"""Programs `scripts/fuzz_nvfuser.py` found disagreeing with eager on an H100 (nvfuser_direct 0.2.36),
minimized, run with the default executors and options: each must give eager's results.

- `sum_then_write`: a fused reduction read a buffer the same fusion wrote (nvFuser ran the writing
  segment first); the fusion pass now leaves such write-backs to torch. Over a size-1 dim nvFuser
  returned that sum as an alias of the input's memory, so the write-back after the fusion changed
  it: inputs written back are now declared with iteration dims (nvfuser_broadcast.py).
- `size_one_read_and_written`: a size-1 input read and written back by one fusion gave a wrong
  output; fixed the same way.
- `sum_written_elsewhere`: writing a broadcast value back failed an internal assert in
  transform_replay.cpp; the value is materialised first.
- `add_size_one_slice`: broadcasting a size-1 slice failed an internal assert in compute_at_map.cpp
  (also after a squeeze); a segment_set before the squeeze avoids it.
- `add_column_sums` into a transposed buffer, `write_value_reused`, `slice_of_old_value`,
  `copy_from_other` (size-1 bf16): the aliased write-back gave wrong values; such write-backs are
  now returned and copied by the runner (nvfuser_aliasing.py).
- `amax_of_written`: a keepdim amax over an expanded broadcast dim came back unreduced.
- `last_row_scaled`, `last_row_then_views`, `sum_into_last_row`, `last_row_shifted_bf16`: a slice
  making a size-1 dim of a longer one read the first row instead (bf16, f16 and f32, most shapes);
  such a slice is now its own segment (a segment_set after it).
- `view_read_after_fused_write`: a fusion wrote `a1` back before torch read a slice of `a1`; the
  fusion pass now orders a write-back after the readers of views of its buffer too.
- `write_into_gaps`: an input with gaps (every other column) written in place got wrong values in
  half its elements (found by the battery of user patterns on CUDA); such write-backs are copied.
- `slice_add_bf16`, `transposed_after_write`: nvFuser raised while compiling (an internal assert in
  bfs.h, an empty RuntimeError); the executor falls back to torch with a warning.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import compiler
from tests.support.inplace_util import same_layout

pytestmark = pytest.mark.nvfuser


def sum_then_write(a0: torch.Tensor, a1: torch.Tensor) -> tuple:
    v0 = torch.neg(a0)
    v7 = torch.neg(a0)
    v8 = torch.sum(a0, 0, keepdim=False)
    a0.add_(v0)
    return v7, v8


def size_one_read_and_written(a0: torch.Tensor) -> tuple:
    v0 = torch.neg(a0)
    v5 = torch.add(a0, v0)
    a0.add_(v0)
    return torch.neg(a0), v5


def sum_written_elsewhere(a0: torch.Tensor, a1: torch.Tensor) -> tuple:
    v0 = torch.sum(a0, 0, keepdim=False)
    a1.copy_(v0)
    return v0, torch.neg(a0)


def add_size_one_slice(a0: torch.Tensor) -> tuple:
    return torch.neg(a0), torch.add(a0, a0[..., 1:])


def written_then_broadcast(a0: torch.Tensor, a1: torch.Tensor) -> tuple:
    a0.add_(1.0)
    return (a1 * a0,)


def add_column_sums(a0: torch.Tensor, a1: torch.Tensor) -> tuple:
    a1.add_(torch.sum(a0, 0))
    return (torch.neg(a0),)


def write_value_reused(a0: torch.Tensor, a2: torch.Tensor) -> tuple:
    a2.copy_(torch.neg(a2))
    return torch.neg(a0), torch.neg(a2)


def slice_of_old_value(a0: torch.Tensor) -> tuple:
    v0 = torch.neg(a0)
    a0.copy_(torch.neg(a0))
    return v0, v0[..., 1:]


def copy_from_other(a0: torch.Tensor, a1: torch.Tensor) -> tuple:
    v2 = torch.neg(a0)
    a0.copy_(torch.neg(a1))
    return v2, torch.neg(a0)


def amax_of_written(a0: torch.Tensor) -> tuple:
    a0.copy_(torch.sum(a0, 0))
    return torch.neg(a0), torch.amax(a0, 0, keepdim=True)


def slice_add_bf16(a0: torch.Tensor) -> tuple:
    a0[1:].add_(1.5)
    return (torch.neg(a0),)


def transposed_after_write(a0: torch.Tensor) -> tuple:
    a0.add_(torch.neg(a0))
    v2 = a0.transpose(0, -1)
    return torch.neg(a0), torch.add(a0, v2)


def last_row_scaled(a0: torch.Tensor) -> tuple:
    return (a0[-1:] * 1.5,)


def last_row_then_views(a0: torch.Tensor) -> tuple:
    a0[1:].mul_(1.5)
    return a0.transpose(0, -1), torch.where(a0 > -2.0, a0, -2.0)


def sum_into_last_row(a0: torch.Tensor) -> tuple:
    v0 = torch.sum(a0, 0, keepdim=False)
    v3 = v0.transpose(0, -1)
    a0[1:].add_(v3)
    return torch.neg(a0), v3


def last_row_shifted_bf16(a0: torch.Tensor, a1: torch.Tensor) -> tuple:
    a0[1:].add_(1.5)
    return torch.add(a0, 3), torch.mean(a0, 1, keepdim=False)


def view_read_after_fused_write(a0: torch.Tensor, a1: torch.Tensor) -> tuple:
    v0 = a1[..., 1:]
    v1 = torch.neg(v0)
    a0[1:].copy_(v0)
    v3 = v1[..., 1:]
    a1.add_(v3)
    return v1, v3


def write_into_gaps(a0: torch.Tensor, a1: torch.Tensor) -> tuple:
    a0.mul_(2).add_(a1)
    return (torch.neg(a1),)


def _transposed(a: torch.Tensor) -> torch.Tensor:
    return a.mT.contiguous().mT


def _every_other_column(a: torch.Tensor) -> torch.Tensor:
    return torch.empty(*a.shape[:-1], 2 * a.shape[-1], device=a.device, dtype=a.dtype)[..., ::2].copy_(a)


CASES = [
    (add_column_sums, [((64, 64), torch.float32), ((64, 64), torch.float32, _transposed)]),
    (add_column_sums, [((2, 2), torch.float32), ((2, 2), torch.float32, _transposed)]),
    (write_value_reused, [((2,), torch.float32), ((2,), torch.float32)]),
    (write_value_reused, [((300, 7), torch.bfloat16), ((300, 7), torch.bfloat16)]),
    (slice_of_old_value, [((2,), torch.float32)]),
    (copy_from_other, [((1,), torch.bfloat16), ((1,), torch.bfloat16)]),
    (amax_of_written, [((2,), torch.float32)]),
    (amax_of_written, [((5, 3), torch.bfloat16)]),
    (sum_then_write, [((1,), torch.float32), ((1,), torch.float32)]),
    (size_one_read_and_written, [((1,), torch.float32)]),
    (size_one_read_and_written, [((1, 3), torch.bfloat16)]),
    (sum_written_elsewhere, [((2,), torch.float32), ((2,), torch.float32)]),
    (sum_written_elsewhere, [((2, 5), torch.bfloat16), ((5,), torch.bfloat16)]),
    (add_size_one_slice, [((2,), torch.float32)]),
    (written_then_broadcast, [((1,), torch.float32), ((3,), torch.float32)]),
    (written_then_broadcast, [((1, 1), torch.float32), ((4, 3), torch.float32)]),
    (add_size_one_slice, [((4, 2), torch.float32)]),
    (sum_then_write, [((7,), torch.float32), ((7,), torch.float32)]),
    (slice_add_bf16, [((2, 1, 2), torch.bfloat16)]),
    (transposed_after_write, [((1, 1), torch.float32)]),
    (transposed_after_write, [((3, 3), torch.float32)]),
    *[
        (last_row_scaled, [(shape, dtype)])
        for dtype in (torch.float32, torch.bfloat16, torch.float16)
        for shape in ((2, 4, 4), (2, 2, 2), (3, 4, 4), (2, 16), (2, 64, 64))
    ],
    (last_row_then_views, [((2, 4, 4), torch.bfloat16)]),
    (sum_into_last_row, [((2, 2, 2), torch.float32)]),
    (last_row_shifted_bf16, [((2, 2, 2), torch.bfloat16, _transposed), ((2, 2, 2), torch.bfloat16, _transposed)]),
    (view_read_after_fused_write, [((3,), torch.float32), ((3,), torch.float32)]),
    (write_into_gaps, [((3, 6), torch.float32, _every_other_column), ((3, 6), torch.float32)]),
    (write_into_gaps, [((64, 512), torch.bfloat16, _every_other_column), ((64, 512), torch.bfloat16)]),
]


@pytest.mark.parametrize(("program", "specs"), CASES, ids=lambda v: getattr(v, "__name__", None))
# specs: (shape, dtype) or (shape, dtype, layout function)
def test_fuzz_findings_match_eager(program, specs) -> None:
    inputs = [spec[2](torch.randn(spec[0], device="cuda").to(spec[1])) if len(spec) == 3 else
              torch.randn(spec[0], device="cuda").to(spec[1]) for spec in specs]  # fmt: skip
    eager_inputs, jit_inputs = [same_layout(t) for t in inputs], [same_layout(t) for t in inputs]
    want = program(*eager_inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a fallback to torch warns; the results are what is checked
        got = compiler.jit(program)(*jit_inputs)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)
    for g, w in zip(jit_inputs, eager_inputs, strict=True):
        torch.testing.assert_close(g, w)
