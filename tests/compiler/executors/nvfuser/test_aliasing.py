"""Which write-backs a fusion writes itself (alias_input) and which it returns for the runner to
copy (compiler/executors/nvfuser/define/aliasing.py); every program also runs end to end on the CPU
double of nvFuser and matches eager, buffers included."""

from __future__ import annotations

import pytest
import torch

import compiler
from compiler.executors.nvfuser import executor as nvfuser_executor
from compiler.executors.nvfuser.define.aliasing import (
    copied_write_backs,
    distinct_outputs,
    fresh_outputs,
    shares_memory,
)
from compiler.executors.nvfuser.define.translations import fusion_source
from compiler.executors.nvfuser.diagnose import fake_nvfuser as fake_api
from compiler.executors.nvfuser.executor import region_fusions
from tests.support.inplace_util import same_layout
from tests.support.nvfuser_helpers import fake_nvfuser  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("fake_nvfuser")


def _copied(fn, *args) -> bool:
    jfn = compiler.jit(fn, executors=["nvfuser", "torch"], fallback=False)
    eager_args, jit_args = [same_layout(a) for a in args], [same_layout(a) for a in args]
    for _ in range(2):  # the second call runs the cached definition
        got, want = jfn(*jit_args), fn(*eager_args)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(jit_args, eager_args)
    [fusion] = region_fusions(compiler.last_traces(jfn)[-1])
    source = fusion_source(fusion.region, fusion.descriptors())[0]
    copied = copied_write_backs(fusion.region, fusion.descriptors())
    assert ("alias_input=" in source) != copied
    return copied


def read_old_then_write(x, y):
    old = x - y
    x.mul_(2).add_(y)
    return old


def write_value_reused(a0, a2):
    v1 = torch.neg(a2)
    a2.copy_(v1)
    return torch.neg(a0), torch.neg(a2)


def slice_of_old_value(a0):
    # NOTE: v0 itself is not returned, so the slice stays in the fusion (a returned value's views
    # are left to torch) and the fusion returns a view of the value it writes back.
    v0 = torch.neg(a0)
    a0.copy_(torch.neg(a0))
    return v0[..., 1:], v0.sin()


def size_one_read_and_written(a0):
    v0 = torch.neg(a0)
    v5 = torch.add(a0, v0)
    a0.add_(v0)
    return torch.neg(a0), v5


def add_column_sums(a0, a1):
    a1.add_(torch.sum(a0, 0))
    return (torch.neg(a0),)


def adam_like(param, moment, grad):
    moment.mul_(0.9).add_(grad, alpha=0.1)
    param.add_(moment, alpha=-0.01)


def test_a_written_value_read_only_by_other_write_backs_stays_aliased():
    assert not _copied(adam_like, torch.randn(4, 8), torch.randn(4, 8), torch.randn(4, 8))


def test_an_elementwise_read_of_the_old_value_stays_aliased():
    assert not _copied(read_old_then_write, torch.randn(4, 8), torch.randn(4, 8))


def test_a_row_major_buffer_with_no_dependent_output_stays_aliased():
    assert not _copied(add_column_sums, torch.randn(3, 3), torch.randn(3, 3))


@pytest.mark.parametrize(
    ("program", "shapes"),
    [
        (write_value_reused, [(2,), (2,)]),
        (slice_of_old_value, [(2,)]),
        (size_one_read_and_written, [(1,)]),
    ],
)
def test_hazardous_write_backs_are_returned_and_copied(program, shapes):
    assert _copied(program, *[torch.randn(s) for s in shapes])


def test_a_transposed_buffer_is_returned_and_copied():
    assert _copied(add_column_sums, torch.randn(3, 3), torch.randn(3, 3).mT)


def test_shares_memory_finds_views_of_buffers():
    buffer = torch.randn(4, 4)
    assert shares_memory(buffer[1:], [buffer]) and shares_memory(buffer.sum(0).unsqueeze(0).expand(2, 4), []) is False
    assert not shares_memory(buffer.clone(), [buffer]) and not shares_memory(3, [buffer])


def test_a_slice_of_a_returned_old_value_is_a_view_outside_the_fusion():
    def program(a0):
        v0 = torch.neg(a0)
        a0.copy_(torch.neg(a0))
        return v0, v0[..., 1:]

    assert not _copied(program, torch.randn(2))  # right (checked in _copied) with nothing to copy


def update_then_matmul(a, e, w):
    a.mul_(2.0).add_(e)
    return a @ w, torch.floor_divide(a, 0.5)


@pytest.mark.parametrize("seed", [0, 1])
def test_an_updated_input_read_by_ops_left_to_torch_comes_from_the_fusion(seed):
    # the fusion writes a back and returns its new value to the matmul and floor_divide after it
    # (the write-back check refused this, so the function did not compile)
    gen = torch.Generator().manual_seed(seed)
    assert _copied(update_then_matmul, *(torch.randn(4, 4, generator=gen) for _ in range(3)))


def masked_fill_in_place(out, mask):
    out.masked_fill_(mask, -1.0)
    return out


@pytest.mark.parametrize("columns", [slice(None, None, 2), slice(1, 5)])
def test_a_buffer_with_gaps_is_returned_and_copied(columns):
    # a step slice or a column block of a wider tensor: nvFuser 0.2.36 wrote such a buffer as if dense
    buffer = torch.randn(3, 12)[:, columns]
    assert _copied(masked_fill_in_place, buffer, torch.rand(buffer.shape) < 0.5)


def test_a_dense_buffer_stays_aliased():
    assert not _copied(masked_fill_in_place, torch.randn(3, 6), torch.rand(3, 6) < 0.5)


def test_distinct_outputs_copies_repeats_and_views_of_one_buffer():
    a, b = torch.randn(3), torch.randn(2, 2)
    out = distinct_outputs([a, a, b, b.view(4), torch.empty(0), 5])
    assert out[0] is a and out[2] is b and out[4].numel() == 0 and out[5] == 5
    for copy, original in [(out[1], a), (out[3], b.view(4))]:
        assert not shares_memory(copy, [a, b])
        torch.testing.assert_close(copy, original)
    written = torch.randn(4)
    kept, copied = distinct_outputs([a, written[1:]], [written])
    assert kept is a and not shares_memory(copied, [written]) and torch.equal(copied, written[1:])


def test_fresh_outputs_are_those_sharing_memory_with_nothing():
    a, b = torch.randn(3), torch.randn(2, 2)
    assert fresh_outputs([a, b, torch.empty(0), 5], [torch.randn(3)])
    assert not fresh_outputs([a, a], [])
    assert not fresh_outputs([b.view(4)], [b])
    assert not fresh_outputs([a, b[1:]], [b])


def _counting_distinct(monkeypatch: pytest.MonkeyPatch) -> list:
    calls: list = []
    original = nvfuser_executor.distinct_outputs
    monkeypatch.setattr(nvfuser_executor, "distinct_outputs", lambda *a: calls.append(1) or original(*a))
    return calls


def test_outputs_nvfuser_allocated_are_not_checked_again(monkeypatch):
    calls = _counting_distinct(monkeypatch)
    jfn = compiler.jit(lambda x: (x.sin(), x.cos()), executors=["nvfuser", "torch"], fallback=False)
    x = torch.randn(3, 4)
    for _ in range(3):
        sin, cos = jfn(x)
        torch.testing.assert_close((sin, cos), (x.sin(), x.cos()))
    assert calls == []


def test_one_tensor_returned_for_two_outputs_is_copied_apart_on_every_call(monkeypatch):
    calls = _counting_distinct(monkeypatch)
    original = fake_api._Fec.execute
    monkeypatch.setattr(fake_api._Fec, "execute", lambda self, *a, **k: [original(self, *a, **k)[0]] * 2)
    jfn = compiler.jit(lambda x: (x * 2, x + x), executors=["nvfuser", "torch"], fallback=False)
    x = torch.randn(3, 4)
    for _ in range(3):
        first, second = jfn(x)
        assert not shares_memory(first, [second])
        torch.testing.assert_close((first, second), (x * 2, x * 2))
    assert len(calls) == 3
