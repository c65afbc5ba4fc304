"""Activations with `inplace=True` and their in-place spellings (torch.relu_, torch.selu_, F.elu_, ...)
against eager: the input and its views are overwritten, the call returns the input itself, gradients
through a non-leaf match, and eager's error for a leaf that requires grad is kept."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import compiler
from tests.support.autodiff_util import check_gradients
from tests.support.inplace_util import check_compiled

SEEDS = range(3)

# name -> an in-place call on a tensor, returning what the call returns.
INPLACE: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "F.relu": lambda t: F.relu(t, inplace=True),
    "F.silu": lambda t: F.silu(t, inplace=True),
    "F.mish": lambda t: F.mish(t, inplace=True),
    "F.hardsigmoid": lambda t: F.hardsigmoid(t, inplace=True),
    "F.hardswish": lambda t: F.hardswish(t, inplace=True),
    "F.elu": lambda t: F.elu(t, 0.5, inplace=True),
    "F.celu": lambda t: F.celu(t, alpha=2.0, inplace=True),
    "F.selu": lambda t: F.selu(t, inplace=True),
    "F.leaky_relu": lambda t: F.leaky_relu(t, 0.2, inplace=True),
    "F.hardtanh": lambda t: F.hardtanh(t, -2.0, 2.5, inplace=True),
    "F.relu6": lambda t: F.relu6(t, inplace=True),
    "F.threshold": lambda t: F.threshold(t, 0.5, -1.0, inplace=True),
    "torch.relu_": torch.relu_,
    "F.relu_": F.relu_,
    "Tensor.relu_": lambda t: t.relu_(),
    "torch.selu_": torch.selu_,
    "torch.celu_": lambda t: torch.celu_(t, 0.5),
    "F.elu_": lambda t: F.elu_(t, alpha=1.5),
    "F.leaky_relu_": lambda t: F.leaky_relu_(t, 0.1),
    "F.hardtanh_": F.hardtanh_,
    "F.hardtanh_ min_val > max_val": lambda t: F.hardtanh_(t, 2.0, 1.0),  # eager clamps: max_val everywhere
    # NOTE: a value above the threshold: the gradient still follows x, not the result
    "torch.threshold_": lambda t: torch.threshold_(t, 1.0, 3.0),
    "F.threshold_": lambda t: F.threshold_(t, -0.5, 0.0),
}


def _x(seed: int, *shape: int) -> torch.Tensor:
    # NOTE: values beyond -3 and 3 reach the flat parts of hardsigmoid and hardswish
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * 4


def _programs(call: Callable) -> list[Callable]:
    """`call` on an input (views of it read afterwards), on an intermediate, and on views of both."""

    def on_input(x):
        row = x[1]
        result = call(x)
        return result is x, row * 1, result + 0

    def on_intermediate(x):
        y = x * 1.5
        result = call(y)
        return result is y, y, x

    def on_view_of_input(x):
        view = x[:, 1:4]
        result = call(view)
        return result is view, x + 0

    def on_transposed_intermediate(x):
        y = x - 0.25
        call(y.t())
        return y

    return [on_input, on_intermediate, on_view_of_input, on_transposed_intermediate]


@pytest.mark.parametrize("name", sorted(INPLACE))
def test_inplace_activation_matches_eager(name: str) -> None:
    for seed in SEEDS:
        for program in _programs(INPLACE[name]):
            check_compiled(program, _x(seed, 4, 6), exact=False)


def test_inplace_activation_returns_the_input_object() -> None:
    x = _x(0, 3, 5)
    expected = torch.relu(x)
    assert compiler.jit(lambda t: F.silu(F.relu(t, inplace=True), inplace=True))(x) is x
    torch.testing.assert_close(x, F.silu(expected))


INTEGER = {
    "F.relu": lambda t: F.relu(t, inplace=True),
    "F.relu6": lambda t: F.relu6(t, inplace=True),
    "F.hardtanh": lambda t: F.hardtanh(t, -2.5, 3.5, inplace=True),  # integers truncate the bounds: [-2, 3]
    "F.hardtanh_": F.hardtanh_,
    "F.threshold": lambda t: F.threshold(t, 1, -4, inplace=True),
    "torch.threshold_": lambda t: torch.threshold_(t, -1.5, 5.5),
}


@pytest.mark.parametrize("name", sorted(INTEGER))
def test_integer_activation_in_place(name: str) -> None:
    call = INTEGER[name]
    check_compiled(lambda t: (call(t), t[0] * 2), torch.arange(-6, 6).reshape(3, 4))
    check_compiled(lambda t: (call(t[:, 1:]), t + 0), torch.arange(-6, 9).reshape(3, 5) * 2)


def test_leaky_relu_of_integers_is_refused_as_eager() -> None:
    with pytest.raises(NotImplementedError):
        F.leaky_relu(torch.arange(3), inplace=True)
    with pytest.raises(TypeError, match="leaky_relu needs a floating tensor"):
        compiler.jit(lambda t: F.leaky_relu(t, inplace=True))(torch.arange(3))


class _Net(nn.Module):
    """A torchvision-style block: activations applied in place to the outputs of layers."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(6, 8), nn.ReLU(inplace=True), nn.Linear(8, 8), nn.SiLU(inplace=True), nn.Linear(8, 5)
        )
        self.head = nn.Sequential(nn.Hardswish(inplace=True), nn.Linear(5, 5), nn.SELU(inplace=True))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.body(x)
        return self.head(y) + y


class _ClippingNet(_Net):
    """The same block with the clipping activations in place (the Linear(8, 8) scaled up so that
    ReLU6 and Hardtanh clip)."""

    def __init__(self) -> None:
        super().__init__()
        self.body[1], self.body[3] = nn.LeakyReLU(0.2, inplace=True), nn.ReLU6(inplace=True)
        with torch.no_grad():
            self.body[2].weight.mul_(8)
        self.head[0], self.head[2] = nn.Hardtanh(-0.5, 1.5, inplace=True), nn.Threshold(0.1, -1.0, inplace=True)


@pytest.mark.parametrize("net", [_Net, _ClippingNet], ids=lambda c: c.__name__)
def test_module_with_inplace_activations_matches_eager(net: type[nn.Module]) -> None:
    torch.manual_seed(0)
    model = net()
    twin = copy.deepcopy(model)
    jitted = compiler.jit(twin)
    for seed in SEEDS:
        x = _x(seed, 7, 6)
        with torch.no_grad():
            torch.testing.assert_close(jitted(x), model(x))
        # gradients of the parameters and of the input, through the in-place activations
        model.zero_grad()
        twin.zero_grad()
        x_eager, x_jit = x.clone().requires_grad_(), x.clone().requires_grad_()
        cotangent = _x(seed + 20, 7, 5)
        model(x_eager).backward(cotangent)
        jitted(x_jit).backward(cotangent)
        torch.testing.assert_close(x_jit.grad, x_eager.grad)
        for (name, p), q in zip(model.named_parameters(), twin.parameters(), strict=True):
            torch.testing.assert_close(q.grad, p.grad, msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.parametrize("name", sorted(INPLACE))
def test_gradients_through_an_inplace_activation_of_a_non_leaf(name: str) -> None:
    call = INPLACE[name]

    def fn(x, w):
        y = x * w
        call(y[:, 1:])
        return y * 2

    for seed in SEEDS:
        check_gradients(fn, [_x(seed, 4, 6), _x(seed + 10, 6)], seed=seed)


@pytest.mark.parametrize(
    "name", ["F.relu", "F.silu", "F.celu", "torch.selu_", "F.elu_", "F.leaky_relu", "F.hardtanh_", "torch.threshold_"]
)
def test_leaf_that_requires_grad_raises_as_eager(name: str) -> None:
    call = INPLACE[name]
    x = torch.randn(3, 4, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad") as eager:
        call(x)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad") as compiled:
        compiler.jit(call)(x)
    with pytest.raises(RuntimeError) as add_:
        compiler.jit(lambda t: t.add_(1))(x)
    assert str(compiled.value) == str(add_.value) == str(eager.value)
    with torch.no_grad():  # no autograd, no error: the leaf is overwritten as in eager
        y = x.detach().clone()
        compiler.jit(call)(x)
        torch.testing.assert_close(x.detach(), call(y))


def test_inplace_on_an_expanded_view_is_refused_as_eager() -> None:
    x = torch.randn(1, 4)
    with pytest.raises(RuntimeError):
        F.silu(x.expand(3, 4), inplace=True)
    with pytest.raises(RuntimeError, match="silu"):
        compiler.jit(lambda t: F.silu(t.expand(3, 4), inplace=True))(x)
