"""In-place ops, `out=` and `__setitem__` against eager PyTorch: on inputs, intermediates and
views of either; every pass checked (tests/support/inplace_util.py). Errors name the op and
the user's line."""

from __future__ import annotations

import operator

import pytest
import torch

import compiler
from tests.support.inplace_util import check_compiled

torch.manual_seed(0)
X = torch.randn(4, 6)
Y = torch.randn(4, 6)
ROW = torch.randn(6)

# (name, in-place call on (target, other)): each runs on an input, an intermediate, and views.
INPLACE_CALLS = {
    "add_": lambda t, o: t.add_(o),
    "add_alpha": lambda t, o: t.add_(o, alpha=-2.5),
    "sub_": lambda t, o: t.sub_(o, alpha=0.5),
    "mul_": lambda t, o: t.mul_(o),
    "mul_scalar": lambda t, o: t.mul_(3),
    "div_": lambda t, o: t.div_(o.abs() + 1),
    "div_floor": lambda t, o: t.div_(0.7, rounding_mode="floor"),
    "pow_": lambda t, o: t.abs_().pow_(o),
    "pow_scalar": lambda t, o: t.pow_(2),
    "addcmul_": lambda t, o: t.addcmul_(o, o, value=0.5),
    "addcdiv_": lambda t, o: t.addcdiv_(o, o.abs() + 1, value=-2),
    "lerp_": lambda t, o: t.lerp_(o, 0.3),
    "lerp_tensor_weight": lambda t, o: t.lerp_(o, o.sigmoid()),
    "clamp_": lambda t, o: t.clamp_(-0.5, 0.5),
    "clamp_min_": lambda t, o: t.clamp_min_(0.1),
    "sqrt_": lambda t, o: t.abs_().sqrt_(),
    "square_": lambda t, o: t.square_(),
    "neg_": lambda t, o: t.neg_(),
    "exp_": lambda t, o: t.exp_(),
    "zero_": lambda t, o: t.zero_(),
    "fill_": lambda t, o: t.fill_(2.5),
    "fill_tensor": lambda t, o: t.fill_(o.reshape(-1)[0]),
    "copy_": lambda t, o: t.copy_(o),
    "copy_broadcast": lambda t, o: t.copy_(o[..., :1] if o.ndim else o),
    "masked_fill_": lambda t, o: t.masked_fill_(o > 0, -1.0),
    "iadd": lambda t, o: operator.iadd(t, o),
    "isub": lambda t, o: operator.isub(t, 1),
    "imul": lambda t, o: operator.imul(t, o),
    "itruediv": lambda t, o: operator.itruediv(t, 2),
    "ipow": lambda t, o: operator.ipow(t, 2),
    "chained": lambda t, o: t.mul_(0.9).add_(o, alpha=0.1).clamp_(-1, 1),
    "addmm_": lambda t, o: t.addmm_(o, o.T @ t, beta=0.5, alpha=0.1),
    "addr_": lambda t, o: t.addr_(o[:, 0], o[0], alpha=-2),
    "addmv_": lambda t, o: t[0].addmv_(o.T, o[:, 0]),
    "baddbmm_": lambda t, o: t.unsqueeze(0).baddbmm_(o.unsqueeze(0), (o.T @ t).unsqueeze(0), beta=2),
}


def _targets(call):
    """Programs applying `call` to an input, an intermediate, and views of both."""

    def on_input(x, y):
        call(x, y)
        return x * 1

    def on_intermediate(x, y):
        z = x * 2
        call(z, y)
        return z, x

    def on_slice(x, y):
        v = x[1:3]
        call(v, y[1:3])
        return x + 0, v * 1

    def on_transpose(x, y):
        v = x.t()
        call(v, y.t())
        return x + 0

    def on_view_of_intermediate(x, y):
        z = x + 1
        v = z[:, 2:5]
        call(v, y[:, 2:5])
        return z, v + 0

    return [on_input, on_intermediate, on_slice, on_transpose, on_view_of_intermediate]


@pytest.mark.parametrize("name", sorted(INPLACE_CALLS))
def test_inplace_op_matches_eager(name):
    for program in _targets(INPLACE_CALLS[name]):
        check_compiled(program, X, Y, exact=False)


@pytest.mark.parametrize(
    "view",
    [
        lambda x: x[1],
        lambda x: x[:, 1::2],
        lambda x: x.narrow(1, 2, 3),
        lambda x: x.view(2, 12),
        lambda x: x.reshape(24),
        lambda x: x.view(-1)[5:9],
        lambda x: x.unsqueeze(0)[:, 1:],
        lambda x: x.transpose(0, 1)[2],
        lambda x: x.split(2)[1],
        lambda x: x.split([1, 5], dim=1)[1],
        lambda x: x.chunk(3, dim=1)[2],
        lambda x: x.unbind(0)[3],
        lambda x: x[None, ..., 2:],
        lambda x: x.permute(1, 0).unsqueeze(2).squeeze(2),
        lambda x: x.t().reshape(24)[:4],  # eager reshape copies here: the write must not reach x
        lambda x: x.t().contiguous(),  # so does contiguous()
        lambda x: torch.cat([x]),  # and a one-tensor cat
        lambda x: x.contiguous().view(24),
    ],
)
def test_writes_through_views_reach_every_alias(view):
    def program(x):
        v = view(x)
        w = x[1:]  # another alias, created before the write
        v.mul_(-3).add_(1)
        return x * 1, w * 1, v * 1

    check_compiled(program, X)
    check_compiled(lambda x: program(x * 1), X)  # the same through an intermediate


def test_reads_between_writes_see_each_version():
    def program(x):
        a = x[0] * 1
        x.add_(1)
        b = x[0] * 1
        x[0] = 0.0
        c = x[:, 0] * 1
        x.t()[1].mul_(2)
        return a, b, c

    check_compiled(program, X)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (0, 1.5),
        (-1, ROW),
        ((slice(None), 2), X[:, 0]),
        ((slice(1, None, 2), slice(None, 3)), 7),
        ((Ellipsis, 1), 2.0),
        ((None, 2), ROW),
        ((1, None, slice(2, 4)), torch.tensor([5.0, 6.0])),
        (slice(None), ROW),
        (Ellipsis, X),
        ((slice(0, 2), Ellipsis, None), ROW.unsqueeze(1)),
    ],
)
def test_setitem(key, value):
    def program(x, v):
        x[key] = v
        return x + 0

    check_compiled(program, X, value)
    check_compiled(program, X.double(), value)  # values cast to the target's dtype


def test_setitem_tensor_keys():
    idx = torch.tensor([3, 0])

    def rows(x, i, v):
        x[i] = v
        return x * 1

    check_compiled(rows, X, idx, ROW)
    check_compiled(rows, X, idx, torch.randn(2, 6))

    def mask(x):
        x[x > 0] = 0.5
        return x * 1

    check_compiled(mask, X)


@pytest.mark.parametrize("pos", [0, 3, 7])
def test_setitem_with_symbolic_slice_bound(pos):
    def program(x, pos, v):
        x[pos : pos + 2] = v
        return x * 1

    check_compiled(program, torch.randn(10, 3), pos, torch.randn(2, 3), numbers="symbolic")


def test_index_copy_and_index_add():
    idx = torch.tensor([4, 0, 2])

    def program(x, i, s, rows):
        x.index_copy_(1, i, s)
        y = x * 1
        y.index_add_(1, i, s, alpha=2)
        x[1:].index_add_(0, rows, y[:2, :])  # a repeated index accumulates
        return y

    check_compiled(program, X, idx, torch.randn(4, 3), torch.tensor([2, 2]))
    check_compiled(lambda x, i, s: x.index_copy_(0, i, s) * 1, X, torch.tensor(2), ROW[None])  # 0-d index


@pytest.mark.parametrize(
    "call",
    [
        lambda a, b, o: torch.add(a, b, alpha=2, out=o),
        lambda a, b, o: torch.mul(a, b, out=o),
        lambda a, b, o: torch.maximum(a, b, out=o),
        lambda a, b, o: torch.sin(a, out=o),
        lambda a, b, o: torch.where(a > b, a, b, out=o),
        lambda a, b, o: torch.clamp(a, -0.2, 0.2, out=o),
        lambda a, b, o: torch.mul(a, b, out=o.t().t()),
        lambda a, b, o: torch.add(a[:2], b[:2], out=o[1:3]),
    ],
)
def test_out(call):
    def program(a, b, o):
        r = call(a, b, o)
        return r * 1, o * 1

    check_compiled(program, X, Y, torch.empty(4, 6))
    wider = torch.zeros(4, 6, dtype=torch.float64)
    try:
        program(X, Y, wider.clone())
    except RuntimeError:
        return  # this op wants out's dtype to be the result's (the compiler casts where it can)
    check_compiled(program, X, Y, wider)


def test_out_returns_the_out_tensor():
    def program(a, o):
        r = torch.mul(a, 2, out=o)
        assert r is o
        return r

    o = torch.empty(4, 6)
    result = compiler.jit(program)(X, o)
    assert result is o and torch.equal(o, X * 2)


def test_inplace_returns_self_and_returns_input_object():
    seen = []

    def program(x):
        y = x.add_(1)
        seen.append(y is x)
        return x

    x = X.clone()
    result = compiler.jit(program)(x)
    assert seen == [True]
    assert result is x  # eager returns the argument itself; so does the compiled function
    assert torch.equal(x, X + 1)


def test_same_tensor_passed_twice():
    def program(a, b):
        a.add_(1)
        c = b * 2  # b is a: sees the write
        b.mul_(3)
        return c, a + 0

    x = torch.randn(5)
    jfn = check_compiled(program, x, x)
    assert len(compiler.last_traces(jfn)[0].inputs) == 1
    # distinct tensors: the guard rejects the entry compiled for one aliased pair; a new entry
    jfn2 = compiler.jit(program)
    for args in [(x.clone(),) * 2, (x.clone(), x.clone()), (x.clone(),) * 2]:
        eager_args = tuple({id(a): a.clone() for a in args}[id(a)] for a in args)
        if args[0] is args[1]:
            eager_args = (eager_args[0], eager_args[0])
        expected = program(*eager_args)
        actual = jfn2(*args)
        torch.testing.assert_close(actual, expected)
        torch.testing.assert_close(args[0], eager_args[0])
    assert compiler.cache_stats(jfn2).misses == 2 and compiler.cache_stats(jfn2).hits == 1


def test_same_tensor_twice_to_a_pure_function_needs_no_guard():
    def program(a, b):
        return a + 2 * b

    jfn = compiler.jit(program)
    x, y = torch.randn(5), torch.randn(5)
    for args in [(x, x), (x, y), (y, y)]:
        torch.testing.assert_close(jfn(*args), program(*args))
    assert compiler.cache_stats(jfn).misses == 1  # aliasing between arguments a pure function reads is moot
    assert "check_aliasing" not in str(compiler.last_prologue(jfn))
    assert len(compiler.last_traces(jfn)[0].inputs) == 2


def test_same_tensor_in_an_optimizer_style_list():
    def program(params, grads):
        for p, g in zip(params, grads):
            p.sub_(g, alpha=0.1)
        return None

    shared = torch.randn(3)
    params, grads = [shared, torch.randn(3), shared], [torch.randn(3), torch.randn(3), torch.randn(3)]
    check_compiled(program, params, grads, exact=False)  # eager fuses alpha * g into an FMA


def test_overlapping_arguments_are_rejected_when_written():
    base = torch.randn(10)

    def program(a, b):
        a.add_(1)
        return b * 1

    with pytest.raises(NotImplementedError, match="share memory"):
        compiler.jit(program)(base[:6], base[4:])
    # reading overlapping arguments without writes is fine
    check_compiled(lambda a, b: a + b, base[:6], base[4:])
    # disjoint views of one storage are fine too (an optimizer over a flat buffer)
    a, b = base[:5], base[5:]
    check_compiled(program, a, b)


def test_layout_guard_recompiles_for_another_layout():
    def program(x):
        v = x.reshape(-1)  # a view when x is contiguous, a copy otherwise
        v.add_(1)
        return x * 1

    jfn = compiler.jit(program)
    contiguous, transposed = torch.randn(4, 6), torch.randn(6, 4).t()
    for x in (contiguous, transposed, contiguous):
        expected_x = x.clone()
        expected = program(expected_x)
        actual = jfn(x)
        torch.testing.assert_close(actual, expected)
        torch.testing.assert_close(x, expected_x)
    assert compiler.cache_stats(jfn).misses == 2
    assert "check_strides" in str(compiler.last_prologue(jfn))


def _line_of(fn, marker: str) -> str:
    import inspect

    return next(line.strip() for line in inspect.getsource(fn).splitlines() if marker in line)


def test_error_expanded_view_names_op_and_line():
    def program(x):
        y = x[:1].expand(4, 6)
        y[0].add_(1)  # marker: expanded write
        return y

    with pytest.raises(NotImplementedError, match=r"torch\.Tensor\.add_ writes into .* expanded") as info:
        compiler.jit(program)(X.clone())
    assert _line_of(program, "marker: expanded write") in str(info.value)


def test_error_cast_names_op_and_line():
    def program(x):
        x.mul_(1.5)  # marker: int cast
        return x

    with pytest.raises(RuntimeError, match=r"torch\.Tensor\.mul_: result type torch\.float32 can't be cast") as info:
        compiler.jit(program)(torch.arange(4))
    assert _line_of(program, "marker: int cast") in str(info.value)
    with pytest.raises(RuntimeError):
        program(torch.arange(4))  # eager agrees


def test_error_inplace_broadcast_names_op_and_line():
    def program(x, y):
        x.add_(y)  # marker: resize
        return x

    with pytest.raises(RuntimeError, match=r"torch\.Tensor\.add_: output with shape") as info:
        compiler.jit(program)(ROW.clone(), X)
    assert _line_of(program, "marker: resize") in str(info.value)


def test_error_ambiguous_reshape_names_op_and_line():
    def program(q):
        o = torch.nn.functional.scaled_dot_product_attention(q, q, q)
        flat = o.reshape(-1)
        flat.add_(1)  # marker: ambiguous
        return o

    with pytest.raises(NotImplementedError, match=r"torch\.Tensor\.add_ writes into .* memory layout") as info:
        compiler.jit(program)(torch.randn(2, 3, 4, 8))
    assert _line_of(program, "marker: ambiguous") in str(info.value)


def test_error_unsupported_setitem_key_names_op_and_line():
    def program(x, v):
        x[x > 0] = v  # marker: key
        return x

    with pytest.raises(NotImplementedError, match=r"torch\.Tensor\.__setitem__.*torch\.where") as info:
        compiler.jit(program)(X.clone(), torch.tensor([1.0, 2.0]))
    assert _line_of(program, "marker: key") in str(info.value)
