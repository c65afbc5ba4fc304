"""Helpers for the autodiff tests: gradients of a jitted function against eager autograd."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import compiler


class AtenOps(TorchDispatchMode):
    """Records the names of the aten ops that run inside it (`with AtenOps() as ops: ...; ops.names`)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        self.names.append(func.__name__.split(".")[0])
        return func(*args, **(kwargs or {}))


def tolerance(dtype: torch.dtype) -> dict[str, float]:
    """Loose for bf16 (the compiler rounds once where eager rounds per op), tight for f32."""
    return {"atol": 5e-2, "rtol": 5e-2} if dtype in (torch.bfloat16, torch.float16) else {"atol": 2e-5, "rtol": 2e-4}


def leaves(value: Any) -> list[Any]:
    """The tensors (and other values) of a nest of tuples and lists, in order."""
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in leaves(v)]
    return [value]


def _copy(args: Sequence[Any], requires_grad: Sequence[bool], dtype: torch.dtype | None = None) -> list[Any]:
    def copy(a: torch.Tensor, r: bool) -> torch.Tensor:
        a = a.detach().clone()
        return (a.to(dtype) if dtype is not None and a.is_floating_point() else a).requires_grad_(r)

    return [copy(a, r) if isinstance(a, torch.Tensor) else a for a, r in zip(args, requires_grad)]


def check_gradients(
    fn: Callable,
    args: Sequence[Any],
    requires_grad: Sequence[bool] | None = None,
    *,
    jfn: Callable | None = None,
    seed: int = 0,
    reference_dtype: torch.dtype | None = None,
) -> Callable:
    """Runs `fn` eagerly and jitted on copies of `args` (those flagged requiring grad), pulls the same
    random cotangents back through both, and compares outputs and every input's gradient.

    reference_dtype: eager runs on floating inputs upcast to it (e.g. float32 for a bf16 program whose
    reductions eager rounds per element first), and is compared after casting back."""
    if requires_grad is None:
        requires_grad = [isinstance(a, torch.Tensor) and a.is_floating_point() for a in args]
    jfn = jfn if jfn is not None else compiler.jit(fn)
    eager_args, jit_args = _copy(args, requires_grad, reference_dtype), _copy(args, requires_grad)
    want, got = leaves(fn(*eager_args)), leaves(jfn(*jit_args))
    generator = torch.Generator().manual_seed(seed)
    pairs = []
    for w, g in zip(want, got, strict=True):
        if isinstance(w, torch.Tensor):
            torch.testing.assert_close(g, w.to(g.dtype), **tolerance(g.dtype))
            assert g.requires_grad == w.requires_grad, (
                f"requires_grad of an output: {g.requires_grad} vs eager {w.requires_grad}"
            )
            if w.requires_grad:
                cotangent = torch.randn(w.shape, generator=generator).to(device=g.device, dtype=g.dtype)
                pairs.append((w, g, cotangent))
        else:
            assert g == w
    inputs = [i for i, r in enumerate(requires_grad) if r]
    eager_grads = torch.autograd.grad(
        [w for w, _, _ in pairs],
        [eager_args[i] for i in inputs],
        [c.to(w.dtype) for w, _, c in pairs],
        allow_unused=True,
    )
    jit_grads = torch.autograd.grad(
        [g for _, g, _ in pairs], [jit_args[i] for i in inputs], [c for _, _, c in pairs], allow_unused=True
    )
    for i, w, g in zip(inputs, eager_grads, jit_grads):
        if w is None:
            assert g is None or not g.any(), f"input {i}: eager has no gradient, the compiler gives {g}"
            continue
        assert g is not None, f"input {i}: the compiler gives no gradient"
        w = w.to(args[i].dtype)
        assert g.dtype == w.dtype and g.shape == w.shape
        torch.testing.assert_close(g, w, **tolerance(w.dtype), msg=lambda m, i=i: f"gradient of input {i}: {m}")
    return jfn


def float64(*values: float) -> torch.Tensor:
    """A float64 vector of `values` (special points: zeros, domain ends, infinities, NaN)."""
    return torch.tensor(values, dtype=torch.float64)


def values_and_grads(fn: Callable, args: Sequence[torch.Tensor], compiled: bool) -> tuple[torch.Tensor, list]:
    """`fn(*args)` (jitted where `compiled`) and the gradients of its sum with respect to each argument."""
    args = [a.clone().requires_grad_() for a in args]
    out = (compiler.jit(fn) if compiled else fn)(*args)
    return out, list(torch.autograd.grad(out, args, torch.ones_like(out)))


def check_special_points(fn: Callable, args: Sequence[torch.Tensor]) -> None:
    """Values and gradients of `fn` jitted at `args` are eager's, NaN included."""
    want, want_grads = values_and_grads(fn, args, compiled=False)
    got, got_grads = values_and_grads(fn, args, compiled=True)
    torch.testing.assert_close(got, want, equal_nan=True)
    for i, (g, w) in enumerate(zip(got_grads, want_grads, strict=True)):
        torch.testing.assert_close(g, w, equal_nan=True, msg=lambda m, i=i: f"gradient of argument {i}: {m}")
