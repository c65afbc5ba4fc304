"""A jitted function against eager: outputs (dtype, shape, values) and the gradients of every floating
input that requires grad, pulled back with one random cotangent per differentiable output."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

import compiler
from tests.support.autodiff_util import leaves


def tolerance(dtype: torch.dtype) -> dict[str, float]:
    """bf16/f16: a couple of ulps (the compiler rounds once where eager may round per step); f32: tight."""
    return {"atol": 2e-2, "rtol": 2e-2} if dtype in (torch.bfloat16, torch.float16) else {"atol": 1e-5, "rtol": 1e-4}


def _copies(args: Sequence[Any], grad: bool, frozen: Sequence[int], dtype: torch.dtype | None = None) -> list[Any]:
    """Fresh leaves with the same strides (`clone` keeps a transposed input transposed), floating
    ones in `dtype` where given and requiring grad with `grad` unless their index is `frozen`."""

    def copy(i: int, a: torch.Tensor) -> torch.Tensor:
        a = a.detach().clone()
        a = a.to(dtype) if dtype is not None and a.is_floating_point() else a
        return a.requires_grad_(grad and a.is_floating_point() and i not in frozen)

    return [copy(i, a) if isinstance(a, torch.Tensor) else a for i, a in enumerate(args)]


def assert_matches_eager(
    fn: Callable,
    *args: Any,
    grad: bool = True,
    equal_nan: bool = False,
    seed: int = 0,
    reference: torch.dtype | None = None,
    frozen: Sequence[int] = (),
    **tol: float,
) -> None:
    """`compiler.jit(fn)(*args)` gives eager's outputs and, with `grad`, eager's gradients.

    reference: eager runs on the floating inputs converted to it (float32 for a bf16 program where
    eager rounds each step of a formula to bf16 and the compiler rounds once), compared converted back.
    frozen: the indices of floating inputs that take no gradient (eager refuses one for a loss's target)."""
    eager_args, jit_args = _copies(args, grad, frozen, reference), _copies(args, grad, frozen)
    want, got = leaves(fn(*eager_args)), leaves(compiler.jit(fn)(*jit_args))
    assert len(want) == len(got)
    generator = torch.Generator().manual_seed(seed)
    pairs = []
    for w, g in zip(want, got):
        if not isinstance(w, torch.Tensor):
            assert g == w
            continue
        if reference is not None and w.dtype == reference:
            w = w.to(g.dtype)
        assert g.dtype == w.dtype and g.shape == w.shape, f"{g.dtype}{list(g.shape)} vs eager {w.dtype}{list(w.shape)}"
        torch.testing.assert_close(g, w.detach(), equal_nan=equal_nan, **(tol or tolerance(w.dtype)))
        if w.requires_grad:
            pairs.append((w, g, torch.randn(w.shape, generator=generator).to(g.dtype)))
    inputs = [i for i, a in enumerate(eager_args) if isinstance(a, torch.Tensor) and a.requires_grad]
    if not pairs or not inputs:
        return
    wants = torch.autograd.grad(
        [w for w, _, _ in pairs],
        [eager_args[i] for i in inputs],
        [c.to(w.dtype) for w, _, c in pairs],
        allow_unused=True,
    )
    gots = torch.autograd.grad(
        [g for _, g, _ in pairs], [jit_args[i] for i in inputs], [c for *_, c in pairs], allow_unused=True
    )
    for i, w, g in zip(inputs, wants, gots):
        if w is None:
            assert g is None or not g.any(), f"input {i}: eager has no gradient, the compiler gives {g}"
            continue
        assert g is not None, f"input {i}: the compiler gives no gradient"
        w = w.to(g.dtype)
        torch.testing.assert_close(
            g, w, equal_nan=equal_nan, **(tol or tolerance(w.dtype)), msg=lambda m, i=i: f"gradient of input {i}: {m}"
        )
