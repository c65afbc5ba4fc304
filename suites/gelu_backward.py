"""GELU backward of a transformer MLP: nvFuser's seed fusion, and GELU through autograd.

`gelu_bias_backward` is the GELU + bias-gradient backward math exactly as issue 4 (and PEERS.md)
state it: three [batch, seq, hidden] tensors t4, t5, t6 and four Python scalars in; the bias
gradient `t4.sum((0, 1))` and the input gradient t38 out. Bytes: the 3 inputs + t38 + the [hidden]
bias gradient. The hand-written nvFuser FusionDefinition of the same math (`nvfuser` variant,
needs CUDA and nvfuser_direct) is what a person would write by hand: every op in fp32, one cast
in and out for bf16. `scripts/nvfuser_acceptance.py` times the jitted program against it.

`gelu_autograd` is F.gelu(approximate="tanh") forward and backward as one training step
(`fusebench.cases.training`): the compiled function is the forward; the backward is what each
variant differentiates it into (for our compiler, its own autodiff: a compiled backward trace,
fused by nvFuser on GPU). Bytes: read x, write y (forward); read x and the output gradient,
write the input gradient (backward).

`gelu_bias_autograd` is the training step whose backward is `gelu_bias_backward`'s math: tanh-GELU
of x + bias at the same shape, forward and backward (input and bias gradients).
"""

from __future__ import annotations

import importlib.util
import math
from typing import Any

import torch
import torch.nn.functional as F

from fusebench.cases import (
    Case,
    Compiled,
    Params,
    SkipVariant,
    Target,
    Variant,
    dtype_named,
    forward_of_step,
    generator,
    random_tensor,
    training_step,
)
from fusebench.integrations.asv_adapter import asv_benchmarks

SCALARS = (0.1, 0.2, 0.3, 0.4)  # s0..s3


def gelu_bias_backward(s0: float, s1: float, s2: float, s3: float, t4: Any, t5: Any, t6: Any) -> tuple:
    """The GELU + bias backward math, verbatim from issue 4: (bias gradient, input gradient)."""
    t16 = torch.tanh(0.797885 * (t6 + 0.044715 * t6**3))
    t28 = (t5 * (0.5 * t6)) * (1 - t16 * t16) * s3
    t38 = t28 + (t28 * s2 * s1) * t6**2 + (t5 * (1 + t16)) * s0
    return t4.sum((0, 1)), t38


def _bias_backward_inputs(params: Params, device: torch.device, seed: int) -> tuple:
    gen = generator(seed)
    dtype = dtype_named(params["dtype"])
    return (*SCALARS, *(random_tensor(params["shape"], dtype, device, gen) for _ in range(3)))


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


def define_gelu_bias_backward(fd: Any, dtype: torch.dtype, ndim: int = 3) -> None:
    """Writes `gelu_bias_backward` into `fd` by hand: inputs s0..s3 (symbolic), t4, t5, t6."""
    from nvfuser_direct import DataType

    storage = {torch.float32: DataType.Float, torch.bfloat16: DataType.BFloat16, torch.float16: DataType.Half}[dtype]
    s0, s1, s2, s3 = (fd.define_scalar(None, dtype=DataType.Double) for _ in range(4))

    def load() -> Any:
        tensor = fd.define_tensor(shape=[-1] * ndim, contiguity=[True] * ndim, dtype=storage)
        return tensor if storage == DataType.Float else fd.ops.cast(tensor, DataType.Float)

    t4, t5, t6 = load(), load(), load()
    t6_sq = fd.ops.mul(t6, t6)
    t16 = fd.ops.tanh(fd.ops.mul(0.797885, fd.ops.add(t6, fd.ops.mul(0.044715, fd.ops.mul(t6_sq, t6)))))
    t28 = fd.ops.mul(fd.ops.mul(fd.ops.mul(t5, fd.ops.mul(0.5, t6)), fd.ops.sub(1.0, fd.ops.mul(t16, t16))), s3)
    t38 = fd.ops.add(
        fd.ops.add(t28, fd.ops.mul(fd.ops.mul(fd.ops.mul(t28, s2), s1), t6_sq)),
        fd.ops.mul(fd.ops.mul(t5, fd.ops.add(1.0, t16)), s0),
    )
    for output in (fd.ops.sum(t4, dims=[0, 1]), t38):
        fd.add_output(output if storage == DataType.Float else fd.ops.cast(output, storage))


def _prepare_nvfuser(target: Target) -> Compiled:
    try:
        from nvfuser_direct import FusionDefinition
    except ImportError as error:
        raise SkipVariant(f"nvfuser_direct failed to import: {error}") from error
    t4 = target.args[4]
    with FusionDefinition() as fd:
        define_gelu_bias_backward(fd, t4.dtype, t4.dim())

    def run(*args: Any) -> tuple[torch.Tensor, torch.Tensor]:
        grad_bias, grad_input = fd.execute(list(args))
        return grad_bias, grad_input

    return Compiled(run)


NVFUSER = Variant(
    "nvfuser",
    _prepare_nvfuser,
    _nvfuser_unavailable,
    "hand-written nvFuser FusionDefinition (nvfuser_direct)",
    reusable=True,
)

# ---------------------------------------------------------------------------------------------
# GELU forward + backward through autograd


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """The forward: tanh-approximated GELU."""
    return F.gelu(x, approximate="tanh")


def gelu_tanh_bias(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """The forward whose backward is `gelu_bias_backward`'s math: tanh-GELU of x + bias."""
    return F.gelu(x + bias, approximate="tanh")


def _bias_autograd_inputs(params: Params, device: torch.device, seed: int) -> tuple:
    gen = generator(seed)
    dtype = dtype_named(params["dtype"])
    x = random_tensor(params["shape"], dtype, device, gen).requires_grad_(True)
    bias = random_tensor(params["shape"][-1:], dtype, device, gen).requires_grad_(True)
    # NOTE: the bias gradient sums every row; a 1/sqrt(rows) output gradient keeps it ~1.
    rows = math.prod(params["shape"][:-1])
    return x, bias, random_tensor(params["shape"], dtype, device, gen, 1.0 / math.sqrt(rows))


def _bias_autograd_bytes(params: Params) -> int:
    numel, hidden = math.prod(params["shape"]), params["shape"][-1]
    # forward: read x, bias, write y; backward: read x, bias, the output gradient, write both gradients
    return dtype_named(params["dtype"]).itemsize * ((2 * numel + hidden) + (3 * numel + 2 * hidden))


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
        # NOTE: the bias gradient sums 8192 values per element (f32 accumulation error ~1e-4 of
        # the sum's scale), and eager bf16 rounds every intermediate of t38 to bf16.
        tolerances={torch.float32: (1e-4, 1e-3), torch.bfloat16: (4e-2, 4e-2)},
        description="GELU + bias backward math of issue 4 (nvFuser's seed fusion): bias and input gradients",
    ),
    Case(
        name="gelu_autograd",
        fn=gelu_tanh,
        make_inputs=_autograd_inputs,
        bytes_moved=_autograd_bytes,
        params={"shape": [(8192, 4096)], "dtype": ["float32"]},
        quick_params={"shape": [(256, 1024)], "dtype": ["float32"]},
        call=training_step,
        forward_call=forward_of_step,
        description="F.gelu(approximate='tanh') forward and backward as one training step",
    ),
    Case(
        name="gelu_bias_autograd",
        fn=gelu_tanh_bias,
        make_inputs=_bias_autograd_inputs,
        bytes_moved=_bias_autograd_bytes,
        params={"shape": [(16, 512, 4096)], "dtype": ["float32"]},
        quick_params={"shape": [(4, 64, 256)], "dtype": ["float32"]},
        call=training_step,
        forward_call=forward_of_step,
        tolerances={torch.float32: (1e-4, 1e-4)},
        description="tanh-GELU of x + bias, forward and backward (its backward is gelu_bias_backward)",
    ),
]

# ASV sees each case as benchmarks '<suite>.<case>.<metric>' (fusebench/integrations/asv_adapter.py).
globals().update(asv_benchmarks(__name__, CASES))
