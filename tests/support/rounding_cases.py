"""Programs whose result depends on bf16/fp16 values being rounded to their dtype where eager rounds
them: a max's backward finding the maximum by equality, comparisons, integer conversions and floor
of values a fusion computes (and would hold in fp32 between ops). Shared by the nvFuser (fake, on
CPU) and Inductor executor tests; each is checked against eager, forward and gradients."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

import compiler


def centred_max(x: torch.Tensor) -> torch.Tensor:
    """A max over values computed in the same fusion: its backward compares them again with the max."""
    t = x * 2
    t = t + t.mean(-1, keepdim=True)
    return t.amax(0)


def max_of_max(x: torch.Tensor) -> torch.Tensor:
    """Two maxima, the second over a broadcast of the first: the backward recomputes the values
    from the mean the forward saved."""
    t = F.silu(x)
    t = t + t.mean(-1, keepdim=True)
    t = t.amax(0)
    return t.unsqueeze(0).expand(2, *t.shape).amax(1)


def max_of_a_rounded_square(x: torch.Tensor) -> torch.Tensor:
    """A max over a value eager rounds to bf16/fp16 and then upcasts: the forward's fusion keeps
    no copy of it, so the backward computes it again from x and compares it with the max."""
    return x.pow(2).float().reshape(-1, x.shape[-1]).amax(1)


def near_integers(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """x * 0.9999 of integers in bf16/fp16 rounds back to them: compared, converted and floored as
    rounded values, not as the slightly smaller product."""
    t = x * 0.9999
    return t == x, t.long(), torch.floor(t), t.ge(x).to(x.dtype) + t


def rounded_on_purpose(x: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """Float32 `x` rounded to bf16/fp16 by the program itself (fake quantization): a fusion that
    holds a bf16 program's values in fp32 must still round these."""
    return x.to(dtype).float() * 3.0, (x * 2.0).to(dtype).float().exp(), x.mT.to(dtype).double()


def check_rounded_on_purpose(x: torch.Tensor, dtype: torch.dtype, executors: list[str]) -> None:
    """`rounded_on_purpose` jitted with `executors` equals eager's to float32's last bits (an
    elided rounding is 2 ** -8 off)."""
    fn = lambda x: rounded_on_purpose(x, dtype)
    for actual, expected in zip(compiler.jit(fn, executors=executors)(x), fn(x)):
        torch.testing.assert_close(actual, expected, rtol=2e-6, atol=1e-7)


DIFFERENTIABLE: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "centred_max": centred_max,
    "max_of_max": max_of_max,
    "max_of_a_rounded_square": max_of_a_rounded_square,
}


def random_input(seed: int, shape: tuple[int, ...], dtype: torch.dtype, device: str = "cpu") -> torch.Tensor:
    """Normal values in `dtype` (ties are frequent in bf16 and fp16)."""
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(device=device, dtype=dtype)


def integers(dtype: torch.dtype, device: str = "cpu") -> torch.Tensor:
    """The integers 1 to 63 in `dtype`, as a 7 x 9 matrix."""
    return torch.arange(1, 64, dtype=torch.float32).reshape(7, 9).to(device=device, dtype=dtype)


def check_against_eager(fn: Callable, x: torch.Tensor, executors: list[str]) -> None:
    """`fn` jitted with `executors` against eager: outputs (to one rounding of their dtype) and,
    for a differentiable `fn`, the input's gradient."""
    differentiable = fn in DIFFERENTIABLE.values()
    eager_x, jit_x = (x.clone().requires_grad_(differentiable) for _ in range(2))
    want = fn(eager_x)
    got = compiler.jit(fn, executors=executors)(jit_x)
    tolerance = {"rtol": 1.6e-2, "atol": 1.6e-2} if x.dtype is torch.bfloat16 else {"rtol": 2e-3, "atol": 2e-3}
    torch.testing.assert_close(got, want, **tolerance)
    if differentiable:
        grad = random_input(7, tuple(want.shape), want.dtype, str(want.device))
        want.backward(grad)
        got.backward(grad)
        torch.testing.assert_close(jit_x.grad, eager_x.grad, **tolerance)
