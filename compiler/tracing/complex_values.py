"""Complex tensors at a traced function's boundary: real tensors in the trace, complex ones outside.

Traces hold real tensors only (ops/complex_proxy.py). A complex tensor argument is guarded as
itself by the prologue, which then makes its real view (`torch.view_as_real`, `VIEW_AS_REAL`):
the computation takes that view as its input, and the function a `ComplexProxy` over it
(`argument`), whose parts are read from it before the function runs (so a program that turns
grad off first still reads them with their gradient). Each `ComplexProxy` in a function's
output is returned by the computation as its real view (`torch.view_as_real`: a real tensor
whose last dim of size 2 holds the parts), and `ComplexOutputs.around` wraps the entry's
computation to give the caller `torch.view_as_complex` of it in that place, a view autograd
differentiates through, as eager's complex tensor would be.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from compiler.core.ir import BoundSymbol, Symbol, TensorProxy, TraceContext, tracing
from compiler.core.output_paths import Path, replaced_at_paths
from compiler.core.proxies import rebuild_tuple
from compiler.ops.complex_proxy import ComplexProxy

# the prologue's real view of a complex tensor argument
VIEW_AS_REAL = Symbol("view_as_real", impl=torch.view_as_real)


class _Inputs(Protocol):
    """What `argument` uses of the frontend's argument builder (tracing/frontend.py)."""

    context: TraceContext
    prologue: list[BoundSymbol]

    def tensor(self, proxy: TensorProxy, value: torch.Tensor) -> TensorProxy: ...


def argument(inputs: _Inputs, proxy: TensorProxy, value: torch.Tensor) -> ComplexProxy:
    """What the traced function receives for complex tensor argument `value`, which the prologue
    guards as `proxy`: a `ComplexProxy` over the computation input that is its real view."""
    real_view = torch.view_as_real(value)
    name = inputs.context.claim(f"{proxy.name}_real")
    real = TensorProxy((*proxy.shape, 2), real_view.dtype, value.device, name=name)
    inputs.prologue.append(BoundSymbol(VIEW_AS_REAL, (proxy,), {}, real))
    complex_value = ComplexProxy.of_packed(inputs.tensor(real, real_view))
    with tracing(inputs.context):
        complex_value.real, complex_value.imag  # noqa: B018  (recorded now: see the module)
    return complex_value


@dataclass(frozen=True)
class ComplexOutputs:
    """Where the computation's output holds the real view of a complex value."""

    paths: tuple[Path, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.paths)

    def around(self, computation: Callable) -> Callable:
        """`computation` as a callable whose output holds the complex values themselves."""
        return replaced_at_paths(computation, self.paths, _complex)


def packed(output: Any) -> tuple[Any, ComplexOutputs]:
    """(the output with each complex value replaced by its real view, where they were); while
    tracing, as the views are computed."""
    paths: list[Path] = []
    return _pack(output, (), paths), ComplexOutputs(tuple(paths))


def _pack(value: Any, path: Path, paths: list[Path]) -> Any:
    if isinstance(value, ComplexProxy):
        paths.append(path)
        return torch.view_as_real(value)
    if isinstance(value, tuple):
        return rebuild_tuple(type(value), [_pack(v, (*path, i), paths) for i, v in enumerate(value)])
    if isinstance(value, list):
        return [_pack(v, (*path, i), paths) for i, v in enumerate(value)]
    if isinstance(value, dict) and type(value) is dict:
        return {k: _pack(v, (*path, k), paths) for k, v in value.items()}
    return value


def _complex(value: Any) -> Any:
    """The complex tensor whose real view `value` is."""
    viewable = value.stride(-1) == 1 and all(s % 2 == 0 for s in value.stride()[:-1])
    return torch.view_as_complex(value if viewable else value.contiguous())
