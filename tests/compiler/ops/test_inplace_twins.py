"""In-place Tensor methods that have no registration of their own but whose out-of-place twin is
registered (compiler/ops/inplace.py `in_place_twin`): `x.gt_(y)` runs as `x.gt(y)` written into `x`.
Against eager: the target's final values and those of views of it taken before the write, the call
returning the target itself, bool and integer targets where eager takes them, eager's refusal of a
result that cannot be cast to the target's dtype, and the metadata methods still refused."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch

import compiler
from compiler.ops.inplace import in_place_twin
from compiler.ops.registry import OPS, lookup
from tests.support.inplace_util import check_compiled

# name -> an in-place call on (target, other), returning what the call returns.
FLOAT_CALLS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "gt_": lambda t, o: t.gt_(o),
    "lt_": lambda t, o: t.lt_(0.25),
    "ge_": lambda t, o: t.ge_(o),
    "le_": lambda t, o: t.le_(o[0]),  # a broadcast row
    "eq_": lambda t, o: t.eq_(t.round()),
    "ne_": lambda t, o: t.ne_(o),
    "greater_": lambda t, o: t.greater_(o),
    "not_equal_": lambda t, o: t.not_equal_(0.0),
    "logical_and_": lambda t, o: t.logical_and_(o > 0),
    "logical_or_": lambda t, o: t.logical_or_(o),
    "logical_xor_": lambda t, o: t.logical_xor_(o > 0.5),
    "logical_not_": lambda t, o: t.logical_not_(),
    "clip_": lambda t, o: t.clip_(-0.5, 0.75),
    "clip_tensor_bounds": lambda t, o: t.clip_(min=o - 1, max=o + 1),
    "nan_to_num_": lambda t, o: t.div_(o.sign()).log_().nan_to_num_(nan=2.0, posinf=9.0),
    "round_": lambda t, o: t.mul_(10).round_(),
    "round_decimals": lambda t, o: t.round_(decimals=2),
    "copysign_": lambda t, o: t.copysign_(o),
    "copysign_scalar": lambda t, o: t.copysign_(-1.0),
    "true_divide_": lambda t, o: t.true_divide_(o.abs() + 1),
    "frac_": lambda t, o: t.mul_(3).frac_(),
    "addbmm_": lambda t, o: t.addbmm_(o.reshape(1, 4, 6), o.reshape(1, 6, 4)[..., :4] @ t, beta=0.5),
}

X = torch.randn(4, 6, generator=torch.Generator().manual_seed(0))
Y = torch.randn(4, 6, generator=torch.Generator().manual_seed(1))
Y[0, 0], Y[1, 1] = 0.0, X[1, 1]  # an equal pair and a zero


def _programs(call: Callable) -> list[Callable]:
    """`call` on an input (views of it read afterwards), on an intermediate, and on views of both."""

    def on_input(x, y):
        row, col = x[1], x.t()[2]
        result = call(x, y)
        assert result is x
        return row * 1, col * 1

    def on_intermediate(x, y):
        z = x * 2
        rows = z[1:3]
        result = call(z, y)
        assert result is z
        return z, rows + 0

    def on_slice(x, y):
        view = x[:, 1:5]
        result = call(view, y[:, 1:5])
        assert result is view
        return x + 0, view * 1

    def on_transpose(x, y):
        view = x.t()
        result = call(view, y.t())
        assert result is view
        return x + 0

    return [on_input, on_intermediate, on_slice, on_transpose]


@pytest.mark.parametrize("program", range(4), ids=["input", "intermediate", "slice", "transpose"])
@pytest.mark.parametrize("name", sorted(FLOAT_CALLS))
def test_float_target_matches_eager(name: str, program: int) -> None:
    call = FLOAT_CALLS[name]
    if name == "addbmm_" and program >= 2:
        pytest.skip("addbmm_'s operands are made for the 4 x 6 target")
    check_compiled(_programs(call)[program], X.clone(), Y.clone(), exact=1e-5 if name == "addbmm_" else True)


INT = torch.tensor([[-3, 0, 2, 7], [5, -1, 0, 4]])
BOOL = torch.tensor([[True, False, True, False], [False, False, True, True]])
# name -> (an in-place call on a target, the target): integer and bool targets eager takes.
EXACT_CALLS: dict[str, tuple[Callable[[torch.Tensor], torch.Tensor], torch.Tensor]] = {
    "int gt_": (lambda t: t.gt_(0), INT),
    "int le_ float": (lambda t: t.le_(0.5), INT),
    "int eq_ tensor": (lambda t: t.eq_(t.flip(0)), INT),
    "int logical_not_": (lambda t: t.logical_not_(), INT),
    "int logical_or_": (lambda t: t.logical_or_(t.flip(1)), INT),
    "int clip_": (lambda t: t.clip_(-1, 4), INT),
    "int round_": (lambda t: t.round_(), INT),
    "int nan_to_num_": (lambda t: t.nan_to_num_(), INT),
    "int bitwise_not_": (lambda t: t.bitwise_not_(), INT),
    "int bitwise_left_shift_": (lambda t: t.abs_().bitwise_left_shift_(2), INT),
    "bool bitwise_not_": (lambda t: t.bitwise_not_(), BOOL),
    "bool logical_not_": (lambda t: t.logical_not_(), BOOL),
    "bool logical_xor_": (lambda t: t.logical_xor_(t.flip(1)), BOOL),
    "bool eq_": (lambda t: t.eq_(t.flip(0)), BOOL),
    "bool ne_ int": (lambda t: t.ne_(1), BOOL),
}


@pytest.mark.parametrize("name", sorted(EXACT_CALLS))
def test_integer_and_bool_targets_match_eager(name: str) -> None:
    call, target = EXACT_CALLS[name]

    def fn(t):
        row = t[1]
        result = call(t)
        assert result is t
        return t * 1, row * 1

    check_compiled(fn, target.clone())


# name -> (an in-place call whose result eager cannot cast to the target's dtype, the target)
UNCASTABLE: dict[str, tuple[Callable[[torch.Tensor], torch.Tensor], torch.Tensor]] = {
    "int true_divide_": (lambda t: t.true_divide_(2), INT),
    "int copysign_": (lambda t: t.copysign_(-1), INT),
    "int clip_ float bounds": (lambda t: t.clip_(0.5, 2.5), INT),
    "bool true_divide_": (lambda t: t.true_divide_(2), BOOL),
}


@pytest.mark.parametrize("name", sorted(UNCASTABLE))
def test_uncastable_result_is_refused_as_eager_refuses_it(name: str) -> None:
    call, target = UNCASTABLE[name]
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
        call(target.clone())
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
        compiler.jit(call)(target.clone())


def test_overlapping_operand_is_refused() -> None:
    """An operand overlapping the target is refused as for every in-place op (ops/aliasing.py: eager's
    result then depends on the order it visits elements)."""

    def fn(x):
        return x[:, 1:].gt_(x[:, :-1])

    with pytest.raises(RuntimeError, match=r"torch\.Tensor\.gt_: unsupported operation: some elements"):
        compiler.jit(fn)(X.clone())


def test_twins_are_resolved_not_listed() -> None:
    """The twins come from the out-of-place registrations, not from OPS entries of their own."""
    for name in ("gt_", "logical_not_", "nan_to_num_", "round_", "clip_", "true_divide_", "bitwise_not_"):
        fn = getattr(torch.Tensor, name)
        assert fn not in OPS
        op = lookup(fn)
        assert op is not None and op.name == f"torch.Tensor.{name}" and in_place_twin(fn) is op
    assert in_place_twin(torch.Tensor.gt) is None  # not in-place
    assert in_place_twin(torch.Tensor.__iadd__) is None  # a dunder, registered on its own
    assert in_place_twin(math.floor) is None


@pytest.mark.parametrize(
    ("name", "args"),
    [("t_", ()), ("transpose_", (0, 1)), ("swapaxes_", (0, 1)), ("swapdims_", (1, 0)), ("squeeze_", ())]
    + [("unsqueeze_", (0,)), ("detach_", ()), ("as_strided_", ((2,), (1,))), ("resize_", ((2,),))],
)
def test_metadata_methods_are_still_refused(name: str, args: tuple) -> None:
    """Their functional twins are registered, but they change the tensor's shape, strides or
    autograd state, not its values: they keep raising with the method's name."""

    def fn(x):
        h = x.clone()
        getattr(h, name)(*args)
        return h

    assert in_place_twin(getattr(torch.Tensor, name)) is None
    with pytest.raises(NotImplementedError, match=rf"torch\.Tensor\.{name} is not supported by the fusebench"):
        compiler.jit(fn)(X.clone())
