"""`Module.to` / `.float()` / `.half()` inside a traced forward: a no-op where nothing changes
(SwitchTransformers' router converts its classifier to its own dtype every call), one line naming
the method, the tensor, the source line and the module where it would convert parameters."""

from __future__ import annotations

import threading

import pytest
import torch
from torch import nn

import compiler


class _ConvertsItsLinear(nn.Module):
    def __init__(self, convert: str) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 3)
        self.register_buffer("scale", torch.full((3,), 2.0))
        self.convert = convert

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.convert == "to_dtype":
            self.linear = self.linear.to(torch.float32)
        elif self.convert == "to_device_and_dtype":
            self.linear = self.linear.to("cpu", torch.float32)
        elif self.convert == "float":
            self.linear.float()
        elif self.convert == "whole_model":
            self.to(x.dtype)
        elif self.convert == "half":
            self.linear.half()
        return self.linear(x) * self.scale


@pytest.mark.parametrize("convert", ["to_dtype", "to_device_and_dtype", "float", "whole_model"])
@pytest.mark.parametrize("seed", [0, 1])
def test_a_conversion_to_the_modules_own_dtype_and_device_is_a_no_op(convert: str, seed: int) -> None:
    torch.manual_seed(seed)
    model = _ConvertsItsLinear(convert)
    jitted = compiler.jit(model)
    x = torch.randn(5, 4, requires_grad=True)
    output = jitted(x)
    expected = model(x)
    torch.testing.assert_close(output, expected)
    # the module keeps its own parameters (not the trace's proxies) and they still train
    assert all(type(p) is nn.Parameter for p in model.parameters())
    (gradient,) = torch.autograd.grad(output.sum(), x)
    (expected_gradient,) = torch.autograd.grad(expected.sum(), x)
    torch.testing.assert_close(gradient, expected_gradient)
    weight_gradient = torch.autograd.grad(jitted(x).sum(), model.linear.weight)[0]
    torch.testing.assert_close(weight_gradient, torch.autograd.grad(model(x).sum(), model.linear.weight)[0])


def test_a_conversion_that_would_change_parameters_is_one_line_naming_method_tensor_line_and_module() -> None:
    model = _ConvertsItsLinear("half")
    with pytest.raises(NotImplementedError) as raised:
        compiler.jit(model)(torch.randn(5, 4))
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("Module.half() inside the traced forward would convert 'weight' (torch.float32 on cpu")
    assert f"{__file__}:" in message and "self.linear.half()" in message
    assert message.endswith("[while tracing module 'linear' (Linear)]")
    assert model.linear.weight.dtype == torch.float32  # nothing was converted


def test_module_to_outside_tracing_is_torchs_own() -> None:
    """While one thread traces, another converts its own (real) module for real."""
    started, release = threading.Event(), threading.Event()

    class _Waits(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            started.set()
            release.wait(timeout=10)
            return x + 1

    thread = threading.Thread(target=lambda: compiler.jit(_Waits())(torch.ones(2)))
    thread.start()
    try:
        assert started.wait(timeout=10)
        other = nn.Linear(2, 2).half()
        assert other.weight.dtype == torch.float16 and type(other.weight) is nn.Parameter
    finally:
        release.set()
        thread.join()
