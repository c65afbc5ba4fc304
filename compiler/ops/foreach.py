"""`torch._foreach_*` ops as loops over the per-tensor ops, and the small queries optimizers make.

`torch._foreach_add(tensors, other)` is `[torch.add(t, o) for t, o in ...]`; its in-place form
`torch._foreach_add_` writes each result into its tensor (with the in-place op's checks). Each
argument is broadcast over the list the way torch's foreach overloads read it: a list (of tensors
or numbers) gives one element per tensor, anything else (a number, a 0-d tensor) is shared; a 1-D
tensor of `scalars` (addcmul/addcdiv) gives one element per tensor. `torch._foreach_pow(number,
exponents)` takes its list second. Tracing records one nested op per tensor, so a fusion sees the
same elementwise prims as the loop `torch.optim(foreach=False)` runs.

`torch._foreach_norm(tensors, ord, dtype)` is one `torch.linalg.vector_norm` per tensor (the norms
`clip_grad_norm_` takes of the gradients before their total).

`torch.is_complex`, `is_floating_point`, real `conj` (the tensor itself, as in eager) and
`detach` (`prims.stop_gradient`: a view no gradient flows through) let torch.optim's step
functions trace.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from compiler import prims
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy
from compiler.ops import aliasing, shape
from compiler.ops.registry import dispatch, register
from compiler.ops.writes import write

_UNARY = ("abs", "ceil", "cos", "erf", "exp", "floor", "log", "log1p", "neg", "reciprocal", "sigmoid", "sin")
_UNARY += ("sqrt", "tanh", "trunc", "sign", "zero", "log2", "log10", "tan", "sinh", "cosh", "erfc")
_BINARY = ("add", "sub", "mul", "div", "maximum", "minimum", "pow", "clamp_min", "clamp_max", "copy")
_TERNARY = ("addcmul", "addcdiv", "lerp")


def _per_tensor(name: str) -> Callable:
    """The per-tensor op of `torch._foreach_<name>` (in place for zero_ and copy_, else functional)."""
    return {"zero": torch.Tensor.zero_, "copy": torch.Tensor.copy_}.get(name) or getattr(torch, name)


def _element(value: Any, i: int, count: int, what: str, per_scalar: bool) -> Any:
    if isinstance(value, (list, tuple)):
        check(
            len(value) == count,
            lambda: f"{what}: a list argument has {len(value)} elements, the tensor list has {count}{called_at()}",
            RuntimeError,
        )
        return value[i]
    if per_scalar and isinstance(value, TensorProxy) and value.ndim == 1:
        check(
            value.shape[0] == count,
            lambda: f"{what}: scalars has {value.shape[0]} elements, the tensor list has {count}{called_at()}",
            RuntimeError,
        )
        return shape.getitem(value, i)
    return value


def _foreach(name: str, arity: int) -> None:
    per_tensor = _per_tensor(name)
    out_of_place, in_place = f"torch._foreach_{name}", f"torch._foreach_{name}_"

    def loop(what: str, args: tuple, kwargs: dict) -> tuple[list, list]:
        check(len(args) >= 1, lambda: f"{what} expects a list of tensors{called_at()}", TypeError)
        lists = [a for a in args if isinstance(a, (list, tuple))]
        check(lists, lambda: f"{what} expects a list of tensors, got {args!r}{called_at()}", TypeError)
        tensors = lists[0] if not isinstance(args[0], (list, tuple)) else args[0]
        count = len(tensors)
        results = []
        for i in range(count):
            elements = [_element(a, i, count, what, per_scalar=arity == 3 and j == 3) for j, a in enumerate(args)]
            extra = {k: _element(v, i, count, what, per_scalar=k == "scalars") for k, v in kwargs.items()}
            if arity == 3 and name != "lerp" and len(elements) > 3:
                extra["value"] = elements.pop(3)
            if "scalars" in extra:
                extra["value"] = extra.pop("scalars")
            if "scalar" in extra:
                elements.append(extra.pop("scalar"))
            results.append(dispatch(per_tensor, tuple(elements), extra))
        return list(tensors), results

    def op(*args: Any, **kwargs: Any) -> list:
        return loop(out_of_place, args, kwargs)[1]

    def op_(*args: Any, **kwargs: Any) -> None:
        targets, results = loop(in_place, args, kwargs)
        if name in ("zero", "copy"):
            return None  # the per-tensor ops wrote already
        for i, (target, result) in enumerate(zip(targets, results)):
            aliasing.check_no_overlap(
                target, tuple(_element(a, i, len(targets), in_place, False) for a in args[1:]), in_place
            )
            write(target, result, in_place)
        return None

    if name not in ("zero", "copy"):
        register(out_of_place)(op)
    register(in_place)(op_)


for _name in _UNARY:
    _foreach(_name, 1)
for _name in _BINARY:
    _foreach(_name, 2)
for _name in _TERNARY:
    _foreach(_name, 3)


@register("torch._foreach_norm")
def foreach_norm(self: Any, ord: Any = 2, dtype: torch.dtype | None = None) -> list[TensorProxy]:
    """The `ord`-norm of each tensor of `self` over all its elements (0-d tensors), in `dtype` or the
    tensor's own dtype: each a `torch.linalg.vector_norm`, whose gradients flow back to the tensor."""
    check(
        isinstance(self, (list, tuple)) and all(isinstance(t, TensorProxy) for t in self),
        lambda: f"torch._foreach_norm expects a list of tensors, got {self!r}{called_at()}",
        TypeError,
    )
    check(
        isinstance(ord, (int, float)) and not isinstance(ord, bool),
        lambda: f"torch._foreach_norm: ord must be a number, got {ord!r}{called_at()}",
        NotImplementedError,
    )
    return [dispatch(torch.linalg.vector_norm, (t, ord), {"dtype": dtype}) for t in self]


@register("torch.is_complex", "torch.Tensor.is_complex")
def is_complex(input: TensorProxy) -> bool:
    return input.dtype.is_complex


@register("torch.is_floating_point")
def is_floating_point(input: TensorProxy) -> bool:
    return input.dtype.is_floating_point


@register("torch.conj", "torch.Tensor.conj")
def conj(input: TensorProxy) -> TensorProxy:
    """A real tensor's conjugate: the tensor itself, as in eager (gradients flow through it); a
    complex one's is in ops/complex_arithmetic.py."""
    return input


@register("torch.Tensor.detach", "torch.detach")
def detach(input: TensorProxy) -> TensorProxy:
    """A view of `input` through which no gradient flows (`prims.stop_gradient`)."""
    return prims.stop_gradient(input)


@register("torch.Tensor.requires_grad_")
def requires_grad_(input: TensorProxy, requires_grad: bool = True) -> TensorProxy:
    """`x.requires_grad_()` while tracing: the tensor itself, its values unchanged (MRA returns a
    zeros tensor made to require grad as the output of an empty attention; the gradients that reach
    the program's inputs are the same). `requires_grad_(False)` is refused: on a parameter it would
    change the model for every later call, which a trace cannot carry."""
    check(
        requires_grad is True,
        lambda: f"Tensor.requires_grad_(False) inside a traced function is not supported{called_at()}",
        NotImplementedError,
    )
    return input
