"""Random ops: dropout, randn, rand and their *_like forms, and the in-place draws `Tensor.uniform_`,
`normal_` and `exponential_` (a router's jitter), drawing from torch's default generator as eager
PyTorch does.

`prims.dropout_noise` makes the tensor eager dropout multiplies by (0 with probability p, else
1 / (1 - p)) with the same generator calls, so under the same seed a compiled program drops the
same elements as eager. In eval mode, or with p = 0, dropout is the identity (the input itself,
as in eager); with p = 1 it multiplies by zero.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from compiler import prims
from compiler.core import dtypes
from compiler.core.errors import called_at, check
from compiler.core.ir import NumberProxy, TensorProxy, canonical_device
from compiler.ops import aliasing, eager_layouts
from compiler.ops.factory import _check_factory_kwargs, size_arguments
from compiler.ops.operands import elementwise, to_dtype
from compiler.ops.registry import register
from compiler.ops.shape import _sizes
from compiler.ops.writes import write


@register("torch.nn.functional.dropout", "torch.dropout")
def dropout(input: TensorProxy, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:
    """input * noise in training mode, where noise is 0 with probability p and 1 / (1 - p) otherwise."""
    # NOTE: a symbolic p is compared as an `if` compares it (the relation guarded); only drawing
    # the noise reads its value
    check(
        isinstance(p, (int, float, NumberProxy)) and 0.0 <= p <= 1.0,
        lambda: f"dropout: p must be a number in [0, 1], got {getattr(p, 'value', p)!r}{called_at()}",
        ValueError,
    )
    check(
        isinstance(input, TensorProxy) and dtypes.is_float(input.dtype),
        lambda: f"dropout: expected a floating point tensor, got {getattr(input, 'dtype', input)!r}{called_at()}",
        TypeError,
    )
    if not training or p == 0.0:
        return input  # NOTE: in place or not, eager returns the input itself
    if p == 1.0:
        dropped = elementwise(prims.mul, input, 0.0)
    else:
        dropped = prims.mul(input, _noise_like(input, float(p)))
    return write(input, dropped, "dropout(inplace=True)") if inplace else dropped


def _noise_like(input: TensorProxy, p: float) -> TensorProxy:
    """Dropout noise for `input`, drawn in the order eager draws it.

    On CPU eager fills `empty_like(input)` (the input's memory order) element after element, so the
    noise of a transposed input (a conv's output read as [batch, length, channels]) is drawn in its
    memory order: the noise is drawn row-major over the dims in that order, then permuted back. Where
    the layout is not known (symbolic sizes) it is drawn row-major.
    """
    order = _memory_order(input) if torch.device(input.device).type == "cpu" else None
    if order is None or order == sorted(order):
        return prims.dropout_noise(list(input.shape), p, input.dtype, input.device)
    noise = prims.dropout_noise([input.shape[d] for d in order], p, input.dtype, input.device)
    return prims.permute(noise, [order.index(d) for d in range(input.ndim)])


def _memory_order(t: TensorProxy) -> list[int] | None:
    """`t`'s dims from slowest to fastest in eager's memory (None where its layout is not known)."""
    strides = eager_layouts.eager_strides(t)
    if strides is None:
        return None
    dense = aliasing.iterator_strides(t.shape, [strides])  # empty_like's strides: the input's order, dense
    return None if dense is None else eager_layouts.memory_order(dense)


def _random_values(name: str, distribution: str, shape: list, dtype: Any, device: Any, generator: Any) -> TensorProxy:
    check(
        generator is None,
        lambda: (
            f"{name}: generator= is not supported (the compiled program draws from torch's default "
            f"generator, as eager does without one){called_at()}"
        ),
        NotImplementedError,
    )
    check(
        dtypes.is_float(dtype),
        lambda: f"{name}: expected a floating point dtype, got {dtype} (as in torch){called_at()}",
        TypeError,
    )
    return prims.random_values(shape, distribution, dtype, canonical_device(device))


def _draw(name: str, distribution: str) -> None:
    @register(f"torch.{name}")
    def op(
        *sizes: Any,
        size: Any = None,
        generator: Any = None,
        out: Any = None,
        dtype: Any = None,
        layout: Any = None,
        device: Any = None,
        requires_grad: bool = False,
        pin_memory: bool = False,
    ) -> TensorProxy:
        _check_factory_kwargs(f"torch.{name}", out, layout, pin_memory)
        shape = _sizes(size_arguments(f"torch.{name}", sizes, size))
        dtype = dtype or torch.get_default_dtype()
        return _random_values(f"torch.{name}", distribution, shape, dtype, device, generator)

    @register(f"torch.{name}_like")
    def like(
        input: TensorProxy,
        *,
        generator: Any = None,
        dtype: Any = None,
        layout: Any = None,
        device: Any = None,
        requires_grad: bool = False,
        memory_format: Any = None,
        pin_memory: bool = False,
    ) -> TensorProxy:
        _check_factory_kwargs(f"torch.{name}_like", None, layout, pin_memory)
        shape = list(input.shape)
        return _random_values(
            f"torch.{name}_like", distribution, shape, dtype or input.dtype, device or input.device, generator
        )


_draw("randn", "normal")
_draw("rand", "uniform")


def _draw_into(name: str, input: TensorProxy, distribution: str, generator: Any, scale: Callable | None) -> TensorProxy:
    """Eager's draw for `input` (the same generator calls), through `scale`: bf16/f16 are drawn and
    scaled in float32 and rounded once, as eager's kernels scale before they round."""
    check(
        isinstance(input, TensorProxy),
        lambda: f"{name}: expected a tensor, got {type(input).__name__}{called_at()}",
        TypeError,
    )
    dtype = input.dtype
    if scale is not None and dtype in (torch.bfloat16, torch.float16):
        dtype = torch.float32
    values = _random_values(name, distribution, list(input.shape), dtype, input.device, generator)
    return values if scale is None else to_dtype(scale(values), input.dtype)


# NOTE: each in-place draw is the out-of-place draw eager's kernel makes (the same generator calls),
# scaled and shifted: eager scales inside its kernel, within a rounding of this.
@register("torch.Tensor.uniform_")
def uniform_(input: TensorProxy, from_: float = 0.0, to: float = 1.0, *, generator: Any = None) -> TensorProxy:
    """`input` overwritten with values drawn uniformly from [from_, to)."""
    scale = None if (from_, to) == (0.0, 1.0) else lambda u: prims.add(prims.mul(u, to - from_), from_)
    return write(input, _draw_into("Tensor.uniform_", input, "uniform", generator, scale), "Tensor.uniform_")


@register("torch.Tensor.normal_")
def normal_(input: TensorProxy, mean: float = 0.0, std: float = 1.0, *, generator: Any = None) -> TensorProxy:
    """`input` overwritten with normally distributed values of this mean and standard deviation."""
    scale = None if (mean, std) == (0.0, 1.0) else lambda z: prims.add(prims.mul(z, std), mean)
    return write(input, _draw_into("Tensor.normal_", input, "normal", generator, scale), "Tensor.normal_")


@register("torch.Tensor.exponential_")
def exponential_(input: TensorProxy, lambd: float = 1.0, *, generator: Any = None) -> TensorProxy:
    """`input` overwritten with exponentially distributed values of rate `lambd`."""
    check(
        isinstance(lambd, (int, float)) and lambd > 0,
        lambda: f"Tensor.exponential_: lambd must be a positive number, got {lambd!r}{called_at()}",
        RuntimeError,
    )
    scale = None if lambd == 1.0 else lambda e: prims.div(e, lambd)
    values = _draw_into("Tensor.exponential_", input, "exponential", generator, scale)
    return write(input, values, "Tensor.exponential_")
