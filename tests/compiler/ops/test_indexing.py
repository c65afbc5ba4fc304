"""Advanced indexing, index_put_ and the writes eager rejects: jitted vs eager, errors included.

(The value-for-value coverage of index tensors, lists and index_put is in opinfo_indexing.py.)
"""

from __future__ import annotations

import pytest
import torch

import compiler


def _both(fn, *args):
    """(eager result, eager arguments after the call, jitted result, jitted arguments after)."""
    eager_args, jit_args = [a.clone() for a in args], [a.clone() for a in args]
    return fn(*eager_args), eager_args, compiler.jit(fn)(*jit_args), jit_args


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_index_put_accumulates_repeated_positions_over_several_index_tensors(seed: int) -> None:
    torch.manual_seed(seed)
    x, values = torch.randn(3, 4, 5), torch.randn(8, 5)
    rows, cols = torch.randint(-3, 3, (8,)), torch.randint(0, 2, (8,))  # many repeats

    def fn(x, rows, cols, values):
        x.index_put_((rows, cols), values, accumulate=True)
        return x

    want, eager_args, got, jit_args = _both(fn, x, rows, cols, values)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(jit_args, eager_args)


def test_setitem_with_index_tensors_and_slices_writes_through_the_view() -> None:
    def fn(x, i, j):
        x[1:, i, j] = 7.0
        x[0, [0, -1]] += 1
        return x

    torch.manual_seed(0)
    want, eager_args, got, jit_args = _both(fn, torch.randn(3, 4, 5), torch.tensor([0, -1]), torch.tensor([2, 3]))
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(jit_args, eager_args)


@pytest.mark.parametrize(
    ("program", "name"),
    [
        (lambda x: x[x > 0], "indexing"),
        (lambda x: torch.nonzero(x), "torch.nonzero"),
        (lambda x: x.nonzero(), "nonzero"),
        (lambda x: torch.masked_select(x, x > 0), "torch.masked_select"),
    ],
)
def test_data_dependent_shapes_are_refused_with_a_pointer_to_where(program, name: str) -> None:
    with pytest.raises(NotImplementedError, match=rf"{name}.*depends on the values.*torch\.where"):
        compiler.jit(program)(torch.randn(3, 4))


@pytest.mark.parametrize(
    "program",
    [
        lambda x: x.view(-1)[1:].add_(x.view(-1)[:-1]),  # eager detects this overlap
        lambda x: x[1:].copy_(x[:-1]),
        lambda x: x.view(-1)[2:].mul_(x.view(-1)[:-2]),
    ],
)
def test_a_source_overlapping_its_target_raises_eagers_error(program) -> None:
    x = torch.randn(4, 5)
    with pytest.raises(RuntimeError, match="some elements of the input tensor") as eager:
        program(x.clone())
    with pytest.raises(RuntimeError, match="some elements of the input tensor") as jitted:
        compiler.jit(program)(x.clone())
    assert type(jitted.value) is type(eager.value)


def test_a_source_overlapping_its_target_where_eager_does_not_check_is_refused() -> None:
    # NOTE: eager runs this, with a result that depends on the order it visits elements.
    with pytest.raises(RuntimeError, match=r"some elements of the input tensor.*order"):
        compiler.jit(lambda x: x[:, 1:].add_(x[:, :-1]))(torch.randn(4, 5))


def test_a_source_that_is_the_target_element_for_element_is_fine() -> None:
    def fn(x):
        x.mul_(x)
        x.t().add_(x.t())
        return x

    want, _, got, _ = _both(fn, torch.randn(4, 5))
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("program", [lambda x: x[0:1].expand(4, 5).add_(1), lambda x: x.expand(2, 4, 5).copy_(x)])
def test_writes_into_expanded_views_raise_eagers_error(program) -> None:
    x = torch.randn(4, 5)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor") as eager:
        program(x.clone())
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        compiler.jit(program)(x.clone())
    assert "Please clone() the tensor" in str(eager.value)


_SLICE_LISTS = {
    "one from the end": lambda x: x[:, :, [-2]],
    "every other": lambda x: x[:, [0, 2, 4]],
    "a run": lambda x: x[..., [1, 2, 3], :],
    "negative run": lambda x: x[:, :, [-3, -2, -1]],
    "after an int": lambda x: x[1, :, [2]],
}


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", sorted(_SLICE_LISTS))
def test_a_list_that_steps_evenly_up_is_a_slice_with_eagers_values_and_gradients(name: str, seed: int) -> None:
    select = _SLICE_LISTS[name]
    torch.manual_seed(seed)
    x = torch.randn(3, 6, 4, 5).transpose(2, 3) if seed == 1 else torch.randn(3, 6, 5, 4)  # strided, contiguous
    x = x.to(torch.bfloat16 if seed == 2 else torch.float32).detach().requires_grad_(True)
    fn = lambda x: select(x) * 2.0
    jitted = compiler.jit(fn)
    got = jitted(x)
    cotangent = torch.randn_like(got)
    (got_grad,) = torch.autograd.grad(got, x, cotangent)
    want = fn(x)
    (want_grad,) = torch.autograd.grad(want, x, cotangent)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got_grad, want_grad)
    forward = str(compiler.last_traces(jitted)[-1])
    backward = str(compiler.last_backward_traces(jitted)[-1])
    assert "index_select" not in forward and "prims.slice(" in forward
    assert "index_add" not in backward


@pytest.mark.parametrize("select", [lambda x: x[:, [2, 0]], lambda x: x[:, [1, 1]], lambda x: x[:, [0, 2, 3]]])
def test_a_list_that_is_no_slice_is_still_gathered(select) -> None:
    x = torch.randn(3, 6, 4)
    jitted = compiler.jit(select)
    torch.testing.assert_close(jitted(x), select(x))
    assert "index_select" in str(compiler.last_traces(jitted)[-1])


def test_a_list_selection_is_a_copy_that_writes_leave_the_source_alone() -> None:
    def fn(x):
        y = x[:, [1]]
        y.add_(1.0)
        return x, y

    want, eager_args, got, jit_args = _both(fn, torch.randn(3, 4))
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(jit_args, eager_args)
