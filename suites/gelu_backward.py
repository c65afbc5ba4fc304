"""GELU backward of a transformer MLP: the seed fusion of nvFuser, and GELU through autograd.

`gelu_bias_backward` is the tanh-GELU + bias backward as fused by Megatron-style MLPs: from the
gradient of the GELU output, the linear layer's output and its bias, compute the gradient of the
GELU input and the bias gradient (its sum over batch and sequence). The inputs are three
[batch, seq, hidden] tensors, the bias materialized at full shape as in the original nvFuser report,
and the math runs in float32 whatever the storage dtype. Bytes: 3 inputs + the input gradient
+ the [hidden] bias gradient.

`gelu_autograd` is F.gelu(approximate="tanh") forward and backward through torch.autograd: the
compiled function is the forward; the backward comes from autograd (for our compiler, once it has
autodiff: until then its output carries no gradient and the variant is unsupported). Bytes: read x,
write y (forward); read x and the output gradient, write the input gradient (backward).

The hand-written nvFuser FusionDefinition variant (`nvfuser`) needs CUDA and `nvfuser_direct`.
"""

from __future__ import annotations

import importlib.util
import math
from typing import Any

import torch
import torch.nn.functional as F

from fusebench.asv_adapter import asv_benchmarks
from fusebench.case import Case, Params, dtype_named, generator, random_tensor
from fusebench.variants import Compiled, SkipVariant, Target, Variant

SQRT_2_OVER_PI = 0.79788456
CUBIC = 0.044715
CUBIC_DERIVATIVE = 0.1070322243  # 3 * CUBIC * SQRT_2_OVER_PI


def gelu_bias_backward(grad: torch.Tensor, bias: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(gradient of the GELU input, bias gradient) for tanh-GELU applied to y + bias."""
    compute = torch.promote_types(grad.dtype, torch.float32)
    g = grad.to(compute)
    x = bias.to(compute) + y.to(compute)
    tanh_out = torch.tanh(SQRT_2_OVER_PI * x * (1 + CUBIC * x * x))
    ff = 0.5 * x * ((1 - tanh_out * tanh_out) * (SQRT_2_OVER_PI + CUBIC_DERIVATIVE * x * x)) + 0.5 * (1 + tanh_out)
    grad_input = ff * g
    grad_bias = grad_input.sum(dim=(0, 1))
    return grad_input.to(grad.dtype), grad_bias.to(grad.dtype)


def _bias_backward_inputs(params: Params, device: torch.device, seed: int) -> tuple:
    gen = generator(seed)
    dtype = dtype_named(params["dtype"])
    return tuple(random_tensor(params["shape"], dtype, device, gen) for _ in range(3))


def _bias_backward_bytes(params: Params) -> int:
    element = dtype_named(params["dtype"]).itemsize
    numel = math.prod(params["shape"])
    return element * (3 * numel + numel + params["shape"][-1])


# ---------------------------------------------------------------------------------------------
# the hand-written nvFuser FusionDefinition


def _nvfuser_unavailable(device: torch.device) -> str | None:
    if device.type != "cuda":
        return f"the hand-written FusionDefinition needs CUDA (device is {device})"
    if importlib.util.find_spec("nvfuser_direct") is None:
        return "nvfuser_direct is not installed (pip install nvfuser-cu130-torch210, the wheel matching torch)"
    return None


def gelu_bias_backward_definition(dtype: torch.dtype, ndim: int = 3) -> Any:
    """The nvFuser FusionDefinition of `gelu_bias_backward` for contiguous inputs of `dtype`."""
    from nvfuser_direct import DataType, FusionDefinition

    storage = {torch.float32: DataType.Float, torch.bfloat16: DataType.BFloat16, torch.float16: DataType.Half}[dtype]
    with FusionDefinition() as fd:

        def scalar(value: float) -> Any:
            return fd.define_scalar(value, dtype=DataType.Double)

        def load() -> Any:
            tensor = fd.define_tensor(shape=[-1] * ndim, contiguity=[True] * ndim, dtype=storage)
            return tensor if storage == DataType.Float else fd.ops.cast(tensor, DataType.Float)

        g, bias, y = load(), load(), load()
        x = fd.ops.add(bias, y)
        x_squared = fd.ops.mul(x, x)
        cubic_term = fd.ops.add(scalar(1.0), fd.ops.mul(scalar(CUBIC), x_squared))
        inner = fd.ops.mul(fd.ops.mul(scalar(SQRT_2_OVER_PI), x), cubic_term)
        tanh_out = fd.ops.tanh(inner)
        sech_squared = fd.ops.sub(scalar(1.0), fd.ops.mul(tanh_out, tanh_out))
        slope = fd.ops.add(scalar(SQRT_2_OVER_PI), fd.ops.mul(scalar(CUBIC_DERIVATIVE), x_squared))
        left = fd.ops.mul(fd.ops.mul(scalar(0.5), x), fd.ops.mul(sech_squared, slope))
        ff = fd.ops.add(left, fd.ops.mul(scalar(0.5), fd.ops.add(scalar(1.0), tanh_out)))
        grad_input = fd.ops.mul(ff, g)
        grad_bias = fd.ops.sum(grad_input, dims=[0, 1], keep_dim=False, dtype=DataType.Float)
        for output in (grad_input, grad_bias):
            fd.add_output(output if storage == DataType.Float else fd.ops.cast(output, storage))
    return fd


def _prepare_nvfuser(target: Target) -> Compiled:
    try:
        fd = gelu_bias_backward_definition(target.args[0].dtype, target.args[0].dim())
    except ImportError as error:
        raise SkipVariant(f"nvfuser_direct failed to import: {error}") from error

    def run(grad: torch.Tensor, bias: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        grad_input, grad_bias = fd.execute([grad, bias, y])
        return grad_input, grad_bias

    return Compiled(run)


NVFUSER = Variant(
    "nvfuser", _prepare_nvfuser, _nvfuser_unavailable, "hand-written nvFuser FusionDefinition (nvfuser_direct)"
)

# ---------------------------------------------------------------------------------------------
# GELU forward + backward through autograd


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """The forward: tanh-approximated GELU."""
    return F.gelu(x, approximate="tanh")


def forward_backward(fn: Any, args: tuple) -> tuple[torch.Tensor, torch.Tensor]:
    """Runs the (compiled) forward, then autograd's backward: (output, input gradient)."""
    x, grad = args
    out = fn(x)
    if not (isinstance(out, torch.Tensor) and out.requires_grad):
        raise NotImplementedError("the compiled forward returned no autograd graph (no autodiff support)")
    (grad_x,) = torch.autograd.grad(out, x, grad)
    return out.detach(), grad_x


def _autograd_inputs(params: Params, device: torch.device, seed: int) -> tuple:
    gen = generator(seed)
    dtype = dtype_named(params["dtype"])
    x = random_tensor(params["shape"], dtype, device, gen).requires_grad_(True)
    return x, random_tensor(params["shape"], dtype, device, gen)


def _autograd_bytes(params: Params) -> int:
    return 5 * math.prod(params["shape"]) * dtype_named(params["dtype"]).itemsize


CASES = [
    Case(
        name="gelu_bias_backward",
        fn=gelu_bias_backward,
        make_inputs=_bias_backward_inputs,
        bytes_moved=_bias_backward_bytes,
        params={"shape": [(16, 512, 4096)], "dtype": ["float32", "bfloat16"]},
        quick_params={"shape": [(4, 64, 256)], "dtype": ["float32", "bfloat16"]},
        extra_variants=(NVFUSER,),
        description="tanh-GELU + bias backward with the bias gradient (nvFuser's seed fusion)",
    ),
    Case(
        name="gelu_autograd",
        fn=gelu_tanh,
        make_inputs=_autograd_inputs,
        bytes_moved=_autograd_bytes,
        params={"shape": [(8192, 4096)], "dtype": ["float32"]},
        quick_params={"shape": [(256, 1024)], "dtype": ["float32"]},
        call=forward_backward,
        description="F.gelu(approximate='tanh') forward and backward through torch.autograd",
    ),
]

# ASV sees each case as benchmarks '<suite>.<case>.<metric>' (fusebench/asv_adapter.py).
globals().update(asv_benchmarks(__name__, CASES))
