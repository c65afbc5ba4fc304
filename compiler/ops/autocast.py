"""`torch.autocast` while tracing: the casts autocast would make, recorded in the trace.

Under `torch.autocast(device_type, dtype)` eager casts the floating inputs of some ops as they are
called: the matrix products, convolutions and attention to the autocast dtype ("lower
precision"), and on CUDA the reductions, norms, losses and transcendental functions listed in
torch's autocast op reference to float32. A trace holds prims, not those ops, and its executors
run with autocast off, so the frontend records the same casts where the program calls such an op
(`cast_arguments`, from `ops/registry.dispatch`): the trace then computes in the dtypes eager
does, and its backward differentiates the casts (a weight's gradient is float32 again).

Autocast is read while the program runs, so a `with torch.autocast(..., enabled=False)` inside it
(transformers' rotary embeddings keep their angles in float32 so) turns the casts off there, as in
eager. Not cast, as in eager: float64 tensors, in-place ops, calls with `out=`, and the float32
ops called with an explicit `dtype=`. The state at the call (`state`) is guarded by the prologue
(`check_autocast`): a call under another autocast state compiles its own entry, and the entry's
computation and backward run with autocast off (`without_autocast`).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

import torch

from compiler.core.ir import TensorProxy
from compiler.ops.operands import to_dtype

DEVICE_TYPES = ("cpu", "cuda")

_PRODUCTS = frozenset(
    {"matmul", "__matmul__", "__rmatmul__", "mm", "bmm", "baddbmm", "addmm", "addbmm", "linear", "einsum",
     "tensordot", "vecdot", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
     "conv_transpose3d", "prelu", "scaled_dot_product_attention", "multi_head_attention_forward"}
)  # fmt: skip
_LOSSES = frozenset(
    {"cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div",
     "binary_cross_entropy", "binary_cross_entropy_with_logits", "cosine_embedding_loss", "hinge_embedding_loss",
     "margin_ranking_loss", "multilabel_margin_loss", "multi_margin_loss", "poisson_nll_loss", "soft_margin_loss",
     "triplet_margin_loss", "cdist", "prod"}
)  # fmt: skip
# op name -> the dtype autocast casts its floating inputs to: None for the autocast dtype
LOWER: dict[str, frozenset[str]] = {
    "cpu": _PRODUCTS,
    "cuda": _PRODUCTS | {"mv", "addmv", "addr", "chain_matmul", "multi_dot"},
}
FLOAT32: dict[str, frozenset[str]] = {
    "cpu": _LOSSES,
    "cuda": _LOSSES
    | {"__pow__", "__rpow__", "__rtruediv__", "__rdiv__", "pow", "acos", "asin", "cosh", "sinh", "tan", "erfinv",
       "exp", "expm1", "log", "log10", "log1p", "log2", "reciprocal", "rsqrt", "softplus", "softmax", "softmin",
       "log_softmax", "cumsum", "cumprod", "sum", "norm", "normalize", "layer_norm", "group_norm", "cosine_similarity",
       "dist", "pdist", "renorm"},
}  # fmt: skip
_ELIGIBLE = (torch.float32, torch.float16, torch.bfloat16)


def state() -> tuple:
    """The autocast state a trace depends on: (device type, dtype) for each device type whose
    autocast is on; () when none is."""
    if not torch._C._is_any_autocast_enabled():
        return ()
    return tuple((d, torch.get_autocast_dtype(d)) for d in DEVICE_TYPES if torch.is_autocast_enabled(d))


def cast_arguments(name: str, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """`args` and `kwargs` of the op registered as `name` (e.g. 'torch.nn.functional.linear') with
    the casts autocast makes of them where it is on for their device; as given elsewhere."""
    if not torch._C._is_any_autocast_enabled():
        return args, kwargs
    op = name.rsplit(".", 1)[-1]
    if kwargs.get("out") is not None or (op.endswith("_") and not op.endswith("__")):
        return args, kwargs
    device = next((p.device.type for p in _tensors(args, kwargs)), None)
    if device not in DEVICE_TYPES or not torch.is_autocast_enabled(device):
        return args, kwargs
    if op in LOWER[device]:
        target, eligible = torch.get_autocast_dtype(device), _ELIGIBLE
    elif op in FLOAT32[device] and kwargs.get("dtype") is None:
        target, eligible = torch.float32, (torch.float16, torch.bfloat16)
    else:
        return args, kwargs
    cast = functools.partial(_cast, target=target, eligible=eligible)
    return tuple(map(cast, args)), {k: cast(v) for k, v in kwargs.items()}


def _tensors(args: tuple, kwargs: dict) -> Iterator[TensorProxy]:
    for value in (*args, *kwargs.values()):
        for item in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(item, TensorProxy):
                yield item


def _cast(value: Any, target: torch.dtype, eligible: tuple) -> Any:
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, target, eligible) for v in value)
    if isinstance(value, TensorProxy) and value.dtype in eligible and value.dtype != target:
        return to_dtype(value, target)
    return value


def without_autocast(fn: Callable[..., Any], traced: tuple) -> Callable[..., Any]:
    """`fn` run with autocast off on the device types of `traced` (a `state()`: the casts are in
    the trace); `fn` itself when that state is ()."""
    if not traced:
        return fn

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        with contextlib.ExitStack() as stack:
            for device, _ in traced:
                stack.enter_context(torch.autocast(device, enabled=False))
            return fn(*args, **kwargs)

    return run
