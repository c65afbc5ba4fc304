"""Causal attention forward + backward on a GPU: `python -m scripts.sdpa_training_step`.

Times one training step of `F.scaled_dot_product_attention(q, k, v, is_causal=True)` (forward, then
backward of the output with a fixed cotangent) at B=4, H=32, S=2048, D=128 in bf16, for eager,
torch.compile and this compiler (its forward keeps the logsumexp; its backward calls the fused
attention backward without running the forward again). Prints one line per variant: median
CUDA-event time with the L2 flushed, and the attention kernels one step launches.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

import compiler
from fusebench.measure.timing import DeviceTimer, L2Flusher

DEVICE = "cuda"


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """The program every variant runs."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def step(fn: Callable, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, grad: torch.Tensor) -> Callable[[], Any]:
    """One forward + backward of `fn`, gradients cleared first."""

    def run() -> None:
        for t in (q, k, v):
            t.grad = None
        fn(q, k, v).backward(grad)

    return run


def median_ms(run: Callable[[], Any], repeats: int) -> float:
    """Median device time of `run()` in ms (CUDA events, L2 flushed before each)."""
    device = torch.device(DEVICE)
    timer, flusher = DeviceTimer(device), L2Flusher(device)
    for _ in range(5):
        run()
    times = []
    for _ in range(repeats):
        flusher.flush()
        times.append(timer.time(run) * 1e3)
    return statistics.median(times)


def attention_kernels(run: Callable[[], Any]) -> list[str]:
    """Names of the attention kernels (flash, fmha, cudnn, ...) one call of `run` launches."""
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    words = ("flash", "fmha", "attention", "cudnn", "sdpa", "mha")
    return [n[:60] for n in names if any(w in n.lower() for w in words)]


def main() -> None:
    """Prints one line per variant."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    generator = torch.Generator(device=DEVICE).manual_seed(0)
    q, k, v = (
        torch.randn(4, 32, 2048, 128, device=DEVICE, dtype=torch.bfloat16, generator=generator).requires_grad_()
        for _ in range(3)
    )
    grad = torch.randn(4, 32, 2048, 128, device=DEVICE, dtype=torch.bfloat16, generator=generator)
    variants = {"eager": attention, "torch.compile": torch.compile(attention), "fusebench": compiler.jit(attention)}
    print(f"causal SDPA forward+backward, B=4 H=32 S=2048 D=128 bf16, {torch.cuda.get_device_name()}")
    reference = None
    for name, fn in variants.items():
        run = step(fn, q, k, v, grad)
        ms = median_ms(run, args.repeats)
        grads = [t.grad.clone() for t in (q, k, v)]
        if reference is None:
            reference = grads
        error = max((g.float() - r.float()).abs().max().item() for g, r in zip(grads, reference))
        kernels = attention_kernels(run)
        print(f"{name:<14} {ms:8.3f} ms  max|grad - eager| {error:.2e}  attention kernels: {kernels}")


if __name__ == "__main__":
    main()
