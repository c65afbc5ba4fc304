"""The fast path of a call (runtime/cache.py, dispatch.py, guard_source.py, autograd.py): the
entry the latest calls used is tried first, its guards alone run (`CacheStats.fast_hits`), and a
call laid out otherwise (shape, strides, dtype, requires_grad, grad mode, a constant number)
still fails them and finds its own entry, with eager's results."""

from __future__ import annotations

import pytest
import torch

import compiler
from compiler.runtime.cache import PROMOTE_AFTER


def _scaled(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x * w).sum(-1) + x.shape[-1]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_calls_laid_out_like_the_last_ones_hit_the_first_entry_tried(seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    small, wide = (
        (torch.randn(3, 4, generator=gen), torch.randn(4, generator=gen)),
        (
            torch.randn(2, 3, 9, generator=gen),
            torch.randn(9, generator=gen),
        ),
    )
    jfn = compiler.jit(_scaled, executors=["torch"])
    calls = [small] * 3 + [wide] * 3 + [small] * (PROMOTE_AFTER + 3)
    for args in calls:
        torch.testing.assert_close(jfn(*args), _scaled(*args))
    first, second = jfn.entries
    stats = compiler.cache_stats(jfn)
    # small: miss + 2 fast; wide: miss (new entry first) + 2 fast; small again: PROMOTE_AFTER later
    # hits (the wide entry's guards fail first), then it is first again: 3 fast hits
    assert (stats.misses, stats.hits, stats.later_hits) == (2, 4 + PROMOTE_AFTER + 3, PROMOTE_AFTER)
    assert stats.fast_hits == 7 and jfn.order == [first, second] and jfn.last_entry is first


def test_calls_alternating_between_entries_never_reorder_them() -> None:
    jfn = compiler.jit(_scaled, executors=["torch"])
    a, b = (torch.randn(5, 4), torch.randn(4)), (torch.randn(6), torch.randn(6))
    for _ in range(3 * PROMOTE_AFTER):
        for args in (a, b):
            torch.testing.assert_close(jfn(*args), _scaled(*args))
    first, second = jfn.entries
    assert jfn.order == [second, first]  # the newest first, never promoted: no streak of later hits
    assert compiler.cache_stats(jfn).later_hits == 3 * PROMOTE_AFTER - 1


def _gelu_scale(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x * w)


@pytest.mark.parametrize("seed", [0, 1])
def test_grad_mode_toggles_and_requires_grad_flips_never_take_another_entry(seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    x, w = torch.randn(4, 6, generator=gen), torch.randn(6, generator=gen)
    jfn = compiler.jit(_gelu_scale, executors=["torch"])
    cotangent = torch.randn(4, 6, generator=gen)
    layouts = [(False, True, True), (False, True, False), (True, False, True), (True, True, True)]
    for x_grad, w_grad, grad_mode in layouts * (PROMOTE_AFTER + 1) + [layouts[0]] * (PROMOTE_AFTER + 2):
        xs, ws = x.clone().requires_grad_(x_grad), w.clone().requires_grad_(w_grad)
        with torch.set_grad_enabled(grad_mode):
            got, want = jfn(xs, ws), _gelu_scale(xs, ws)
        torch.testing.assert_close(got, want)
        assert got.requires_grad == want.requires_grad
        if want.requires_grad:
            wrt = [t for t in (xs, ws) if t.requires_grad]
            grads = torch.autograd.grad(got, wrt, cotangent)
            torch.testing.assert_close(grads, torch.autograd.grad(want, wrt, cotangent))
    assert len(jfn.entries) == 4 and compiler.cache_stats(jfn).misses == 4
    assert jfn.order[0] is jfn.entries[0]  # the last calls' entry moved to the front
    source = jfn.func.__fusebench_source__
    guard = source[: source.index("_stats.hits")]
    # the first entry's requires_grad flags are compared by its tensors' C++ check, not per call
    (grad_line,) = [line for line in guard.splitlines() if "is_grad_enabled" in line]
    assert "requires_grad" not in grad_line and guard.count(".requires_grad") == 2, guard


def _rows(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(-1)[: x.shape[1]] * 2.0 + x[0]


@pytest.mark.parametrize("seed", [0, 1])
def test_a_tensor_swapped_for_one_with_other_strides_gets_eagers_result(seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    square = torch.randn(5, 5, generator=gen)
    jfn = compiler.jit(_rows, executors=["torch"])
    for x in [square] * (PROMOTE_AFTER + 1) + [square.t()] * (PROMOTE_AFTER + 1) + [square] * 2 + [square.t()]:
        torch.testing.assert_close(jfn(x), _rows(x))
    expanded = torch.randn(1, 5, generator=gen).expand(5, 5)  # stride 0: another layout again
    torch.testing.assert_close(jfn(expanded), _rows(expanded))


def _times(x: torch.Tensor, n: float) -> torch.Tensor:
    return x * n + 1


@pytest.mark.parametrize("automatic_dynamic", [False, True])
def test_a_number_changing_under_constant_numbers_is_never_served_a_stale_constant(automatic_dynamic: bool) -> None:
    x = torch.randn(7)
    jfn = compiler.jit(_times, numbers="constant", automatic_dynamic=automatic_dynamic, executors=["torch"])
    values = [2.0] * (PROMOTE_AFTER + 1) + [3.0] * (PROMOTE_AFTER + 1) + [2.0] * (PROMOTE_AFTER + 1) + [5.0, 2.0]
    for n in values:
        torch.testing.assert_close(jfn(x, n), _times(x, n))
    stats = compiler.cache_stats(jfn)
    # constant entries: one per value; automatic dynamic: n becomes symbolic at the first miss
    assert stats.misses == (3 if not automatic_dynamic else 2)
    assert stats.hits + stats.misses == len(values) and stats.fast_hits > len(values) // 2


def _two_outputs(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x.sin() * 2, x.cos().sum()


def test_backwards_with_every_cotangent_or_some_alternate_and_stay_right() -> None:
    x = torch.randn(3, 4, requires_grad=True)
    jfn = compiler.jit(_two_outputs, executors=["torch"])
    for use_both in [True, False, True, True, False]:
        a, b = jfn(x)
        ea, eb = _two_outputs(x)
        got = torch.autograd.grad((a.sum() + b) if use_both else a.sum(), x)
        want = torch.autograd.grad((ea.sum() + eb) if use_both else ea.sum(), x)
        torch.testing.assert_close(got, want)
        assert jfn.last_entry.computation.last_present == (True, use_both)
    assert sorted(jfn.last_entry.computation.backwards) == [(True, False), (True, True)]
