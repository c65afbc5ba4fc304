"""A differentiated program that is one torch op on CPU (a softmax, a layer norm, a GELU: its only
region runs as that op, executors/one_op_regions.py) runs that op under grad mode, so the op records
its own ATen backward as in eager; values and gradients against eager, and what stays compiled."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import compiler
from compiler.executors.inductor import unavailable_reason

pytestmark = pytest.mark.skipif(unavailable_reason() is not None, reason=f"{unavailable_reason()}")

INDUCTOR = ["inductor", "torch"]

# (program over (x, w, b), the inputs it takes)
PROGRAMS = {
    "gelu_tanh": (lambda x, w, b: F.gelu(x, approximate="tanh"), 1),
    "gelu": (lambda x, w, b: F.gelu(x), 1),
    "softmax": (lambda x, w, b: torch.softmax(x, -1), 1),
    "log_softmax": (lambda x, w, b: x.log_softmax(dim=-1), 1),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, x.shape[-1:], w, b, 1e-5), 3),
    "silu_times": (lambda x, w, b: F.silu(x) * w, 2),
}


def _inputs(seed: int, shape: tuple[int, ...], dtype: torch.dtype, count: int, strided: bool) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=gen).to(dtype)
    if strided:  # the same values, laid out transposed
        x = x.t().contiguous().t()
    others = [torch.randn(shape if k == 1 and count == 2 else shape[-1:], generator=gen).to(dtype) for k in (1, 2)]
    return [t.requires_grad_(True) for t in [x, *others][:count]]


@pytest.mark.parametrize("name", list(PROGRAMS))
@pytest.mark.parametrize(
    ("shape", "dtype", "strided"),
    [((4, 8), torch.float32, False), ((1, 8), torch.float32, False), ((6, 8), torch.bfloat16, False),
     ((5, 8), torch.float32, True)],
)  # fmt: skip
def test_a_one_op_program_gets_eagers_backward_and_its_gradients(name, shape, dtype, strided) -> None:
    program, count = PROGRAMS[name]
    fn = lambda *args: program(*args, *(None,) * (3 - len(args)))
    jfn = compiler.jit(fn, executors=INDUCTOR, fallback=False)
    for seed in range(3):
        ours, theirs = _inputs(seed, shape, dtype, count, strided), _inputs(seed, shape, dtype, count, strided)
        got, want = jfn(*ours), fn(*theirs)
        # NOTE: ATen's bf16 layer-norm backward on CPU is slower than a compiled one: that stays compiled
        compiled = name == "layer_norm" and dtype == torch.bfloat16
        assert (type(got.grad_fn).__name__ == type(want.grad_fn).__name__) != compiled, got.grad_fn
        # ATen's own node: the very same numbers; compiled, within bf16's rounding (fp32 inside)
        exact = {"atol": 2e-2, "rtol": 2e-2} if compiled else {"atol": 0, "rtol": 0}
        torch.testing.assert_close(got, want, **exact)
        cotangent = torch.randn(want.shape, generator=torch.Generator().manual_seed(seed)).to(dtype)
        torch.testing.assert_close(
            torch.autograd.grad(got, ours, cotangent), torch.autograd.grad(want, theirs, cotangent), **exact
        )
    assert compiler.cache_stats(jfn).misses == 1 and (compiled or compiler.examine.stats(jfn).compiled == 0)


def test_the_same_program_without_grad_and_under_no_grad_still_matches() -> None:
    jfn = compiler.jit(lambda x: torch.softmax(x, -1), executors=INDUCTOR, fallback=False)
    x = torch.randn(4, 8)
    assert jfn(x.clone().requires_grad_(True)).grad_fn is not None
    assert jfn(x).grad_fn is None
    with torch.no_grad():
        assert jfn(x.clone().requires_grad_(True)).grad_fn is None
    torch.testing.assert_close(jfn(x), torch.softmax(x, -1), atol=0, rtol=0)


def test_a_second_order_gradient_goes_through_the_op_as_in_eager() -> None:
    fn = lambda x: F.gelu(x, approximate="tanh")
    x = torch.randn(4, 8, requires_grad=True)
    jfn = compiler.jit(fn, executors=INDUCTOR, fallback=False)
    (g1,) = torch.autograd.grad(jfn(x).sum(), x, create_graph=True)
    (g2,) = torch.autograd.grad(g1.sum(), x)
    (e1,) = torch.autograd.grad(fn(x).sum(), x, create_graph=True)
    torch.testing.assert_close(g2, torch.autograd.grad(e1.sum(), x)[0], atol=0, rtol=0)


@pytest.mark.slow  # an Inductor compilation of the backward
def test_a_program_with_something_to_fuse_keeps_its_compiled_backward() -> None:
    fn = lambda x, b: F.gelu(x + b, approximate="tanh")
    x, b = torch.randn(4, 8, requires_grad=True), torch.randn(8, requires_grad=True)
    jfn = compiler.jit(fn, executors=INDUCTOR, fallback=False)
    out = jfn(x, b)
    assert "Gelu" not in type(out.grad_fn).__name__
    torch.testing.assert_close(torch.autograd.grad(out.sum(), (x, b)), torch.autograd.grad(fn(x, b).sum(), (x, b)))
