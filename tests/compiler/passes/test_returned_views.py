"""A returned view of an input the function writes into aliases that input, as in eager PyTorch:
same storage, offset and strides, and writing into the result changes the input
(functionalize replays the view after the write-back; check_writebacks, cse, fuse and
update_in_place keep such views after it and outside fusions)."""

from __future__ import annotations

import warnings

import pytest
import torch

import compiler
from compiler import examine
from compiler.executors.nvfuser.executor import FusionFallbackWarning
from compiler.prims import Prim
from tests.support.inplace_util import clone_args, sharing
from tests.support.nvfuser_helpers import fake_nvfuser  # noqa: F401 - a fixture


def _slice(x):
    x.add_(1)
    return x[1:]


def _view_taken_before_the_write(x):
    v = x[:, 1]
    x.mul_(2)
    return v


def _chain(x):
    x[0].sub_(3)
    return x.t()[1:, ::2].unsqueeze(0)


def _reshape_and_expand(x):
    x.clamp_(min=0)
    return x.reshape(-1), x[:1].expand(3, -1)


def _several_inputs(x, y):
    y.add_(x)
    x.mul_(0.5)
    return x[::2], y.permute(1, 0), y


def _written_through_a_view(x, y):
    x[1:].copy_(y[1:])
    return x[:, :2], y[0]


def _old_and_new_view(x):
    old = x[1:] * 2  # reads x before the write: an equal view after it is another value
    x.add_(1)
    return old, x[1:]


def _partial_update(cache, index, rows):
    cache.index_copy_(0, index, rows)
    return cache[:2]


PROGRAMS = {
    f.__name__.lstrip("_"): f
    for f in (
        _slice,
        _view_taken_before_the_write,
        _chain,
        _reshape_and_expand,
        _several_inputs,
        _written_through_a_view,
        _old_and_new_view,
    )
}


def _inputs(name: str, seed: int, shape: tuple[int, int]) -> tuple:
    torch.manual_seed(seed)
    count = 2 if name in ("several_inputs", "written_through_a_view") else 1
    return tuple(torch.randn(shape) for _ in range(count))


def _offset(view: torch.Tensor, base: torch.Tensor) -> int:
    return (view.data_ptr() - base.data_ptr()) // view.element_size()


def _memory(outputs: object, args: tuple) -> list[tuple[int, int, tuple, tuple] | None]:
    """For each output: (which argument's storage it views, offset, shape, strides) or None."""
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    found = []
    for out in outputs:
        owners = [i for i, a in enumerate(args) if out.untyped_storage().data_ptr() == a.untyped_storage().data_ptr()]
        base = args[owners[0]] if owners else None
        strides = tuple(st for st, size in zip(out.stride(), out.shape) if size > 1)  # NOTE: others never matter
        found.append((owners[0], _offset(out, base), tuple(out.shape), strides) if owners else None)
    return found


def _check(fn, args: tuple, **jit_options) -> compiler.JittedFunction:
    """jit(fn) against eager: values, the memory of every output, and writes into the outputs."""
    eager_args, jit_args = clone_args(args), clone_args(args)
    expected = fn(*eager_args)
    jfn = compiler.jit(fn, **jit_options)
    for _ in range(2):  # the second call is a cache hit
        jit_args = clone_args(args)
        actual = jfn(*jit_args)
        torch.testing.assert_close(actual, expected)
        torch.testing.assert_close(jit_args, eager_args)
        assert _memory(actual, jit_args) == _memory(expected, eager_args)
    for out_e, out_j in zip(*(o if isinstance(o, tuple) else (o,) for o in (expected, actual))):
        if out_e.stride() and 0 in out_e.stride():
            continue  # NOTE: an expanded view cannot be written into, in eager either
        out_e.add_(10)
        out_j.add_(10)
    torch.testing.assert_close(jit_args, eager_args)
    return jfn


def test_a_returned_slice_of_an_updated_input_is_that_input():
    x = torch.zeros(4)
    out = compiler.jit(_slice)(x)
    assert out.data_ptr() == x[1:].data_ptr()
    out[0] = 7.0
    assert x.tolist() == [1.0, 7.0, 1.0, 1.0]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("seed, shape", [(0, (4, 6)), (1, (3, 3)), (2, (5, 2))])
def test_returned_views_alias_the_inputs_as_in_eager(name, seed, shape):
    _check(PROGRAMS[name], _inputs(name, seed, shape))


def test_the_views_follow_the_writebacks_in_the_final_trace():
    def fn(x):
        x.mul_(2)
        return x.t()[1:, ::2].unsqueeze(0)

    jfn = _check(fn, _inputs("chain", 0, (4, 6)))
    bsyms = compiler.last_traces(jfn)[-1].bsyms
    last_writeback = max(i for i, b in enumerate(bsyms) if b.sym is Prim.COPY_TO)
    assert [b.sym for b in bsyms[last_writeback + 1 :]] == [Prim.PERMUTE, Prim.SLICE, Prim.BROADCAST_IN_DIM]


def test_a_view_before_and_one_after_the_write_are_not_merged():
    jfn = _check(_old_and_new_view, _inputs("old_and_new_view", 0, (4, 6)))
    slices = [b for b in compiler.last_traces(jfn)[-1].bsyms if b.sym is Prim.SLICE]
    assert len(slices) == 2


def test_a_partial_update_stays_in_place_and_the_view_aliases_the_cache():
    cache, index, rows = torch.randn(6, 4), torch.tensor([4, 1]), torch.randn(2, 4)
    jfn = _check(_partial_update, (cache, index, rows))
    final = compiler.last_traces(jfn)[-1]
    assert not any(b.sym is Prim.COPY_TO for b in final.bsyms), "index_copy_ runs in the cache's memory"


def test_the_fusion_pass_leaves_the_view_to_torch():
    def fn(x, y):
        x.mul_(y).add_(1)
        return x[1:].t()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        jfn = _check(fn, _inputs("several_inputs", 0, (4, 4)), executors=["nvfuser"], fusion={"runner": "torch"})
    assert len(examine.fusions(jfn)) == 1
    left_out = [d for d in examine.why_not_fused(jfn) if d.bsym.sym in (Prim.SLICE, Prim.PERMUTE)]
    assert [d.detail.split()[:3] for d in left_out] == [["a", "view", "of"]] * 2
    assert left_out[0].detail == "a view of x after its write-back"


def test_returned_views_alias_the_inputs_through_nvfuser_definitions(fake_nvfuser):  # noqa: F811
    with warnings.catch_warnings():
        warnings.simplefilter("error", FusionFallbackWarning)
        jfn = _check(_several_inputs, _inputs("several_inputs", 0, (4, 4)), executors=["nvfuser", "torch"])
    (fusion,) = examine.fusions(jfn)
    assert fusion.runner == "nvfuser" and not any("slice" in op or "permute" in op for op in fusion.ops)


@pytest.mark.nvfuser
def test_returned_views_alias_the_inputs_with_nvfuser():
    args = tuple(a.cuda() for a in _inputs("several_inputs", 0, (64, 32)))
    _check(_several_inputs, args, executors=["nvfuser", "torch"], fallback=False)
    _check(_chain, args[:1], executors=["nvfuser", "torch"], fallback=False)


def test_a_returned_view_with_symbolic_bounds_aliases_on_every_call():
    def fn(x, n):
        x.add_(n)
        return x[1:n]

    jfn = compiler.jit(fn, numbers="symbolic")
    x = torch.zeros(6)
    for n in (2, 3, 4):
        out = jfn(x, n)
        assert out.data_ptr() == x[1:n].data_ptr() and out.shape == (n - 1,)
    assert compiler.cache_stats(jfn).misses == 1


def test_a_returned_view_aliases_when_the_entry_runs_under_autograd():
    def fn(w, buffer):
        buffer.add_(1)
        return (w * 2).sum(), buffer[1:]

    w, buffer = torch.randn(3, requires_grad=True), torch.zeros(4)
    loss, view = compiler.jit(fn)(w, buffer)
    loss.backward()
    assert view.data_ptr() == buffer[1:].data_ptr()
    torch.testing.assert_close(w.grad, torch.full((3,), 2.0))


def _overwritten_fresh_tensors(x):
    state = torch.zeros(x.shape[0], 3)
    state.copy_(x[:, -3:])  # a cache's new state: the last positions
    whole = torch.zeros_like(x)
    whole.copy_(x)
    window = torch.zeros(x.shape[0], 3)  # a conv state: the last positions of an intermediate
    window.copy_(torch.cat([x, x * 2], -1)[:, -3:])
    last = torch.zeros_like(x)  # a scan's final state: the last of a stack of steps
    last.copy_(torch.stack([x, x.cumsum(-1), x.exp()])[-1])
    return state, whole, window, last


@pytest.mark.parametrize("executors", [["torch"], ["nvfuser", "torch"], ["inductor", "torch"]], ids="+".join)
def test_a_tensor_made_and_overwritten_whole_has_memory_of_its_own_as_in_eager(executors, request) -> None:
    # returned as the view (or the input) it was overwritten with, it would share that memory:
    # keep the view's base alive (a scan's whole stack of states), alias the caller's input, and,
    # made under no_grad, refuse an in-place write under grad mode as a view made under no_grad does
    if "nvfuser" in executors:
        request.getfixturevalue("fake_nvfuser")
    x = torch.randn(2, 5, generator=torch.Generator().manual_seed(len(executors)))
    with torch.no_grad():
        got = compiler.jit(_overwritten_fresh_tensors, executors=executors)(x)
    expected = _overwritten_fresh_tensors(x)
    for tensor, want in zip(got, expected):
        torch.testing.assert_close(tensor, want)
        assert tensor._base is None and tensor.untyped_storage().nbytes() == want.untyped_storage().nbytes()
    whole = got[1]
    assert whole.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    for tensor in got:
        tensor.add_(1)  # under grad mode, as eager allows
    expected_whole = expected[1]
    torch.testing.assert_close(x, expected_whole)  # the input is untouched


def _made_and_overwritten_with_views(x, y):
    copied = torch.zeros(x.shape)
    copied.copy_(x)  # x's value in memory of its own
    state = torch.zeros(x.shape)
    state.copy_(y)
    state.masked_fill_(state > 0, 0.5)
    again = torch.zeros(x.shape)
    again.copy_(state)  # state's value, in other memory than state's
    return copied.unsqueeze(1), copied, again, state.reshape(-1), x * 2, x * 2, (x * 3).reshape(-1), x * 3


@pytest.mark.parametrize("executors", [["torch"], ["nvfuser", "torch"], ["inductor", "torch"]], ids="+".join)
def test_returned_tensors_share_memory_exactly_where_eager_s_do(executors, request) -> None:
    # a view of a tensor made and overwritten with an input's value views that tensor's own copy,
    # not the input; two tensors holding one value, or computed alike (merged by cse, or folded),
    # come back apart: a write into one would otherwise change the other
    if "nvfuser" in executors:
        request.getfixturevalue("fake_nvfuser")
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    got = compiler.jit(_made_and_overwritten_with_views, executors=executors)(x, y)
    expected = _made_and_overwritten_with_views(x, y)
    for tensor, want in zip(got, expected):
        torch.testing.assert_close(tensor, want)
    assert sharing((x, y, *got)) == sharing((x, y, *expected)) == [(2, 3)]  # a copy and its view


def _written_through_a_view(x):
    made = x.sin()
    window = made.narrow(0, 0, 1)
    window.add_(window, alpha=-0.5)  # made changes through window
    return made, window


@pytest.mark.parametrize("executors", [["torch"], ["nvfuser", "torch"]], ids="+".join)
def test_a_returned_view_of_a_made_and_written_tensor_views_its_final_value(executors, request) -> None:
    if "nvfuser" in executors:
        request.getfixturevalue("fake_nvfuser")
    x = torch.randn(4, 6)
    got = compiler.jit(_written_through_a_view, executors=executors)(x)
    expected = _written_through_a_view(x)
    for tensor, want in zip(got, expected):
        torch.testing.assert_close(tensor, want)
    assert sharing((x, *got)) == sharing((x, *expected)) == [(1, 2)]
    got[1].zero_()  # a write into the view reaches the tensor, as in eager
    assert not got[0][0].any()
