"""Issue 4's acceptance numbers on a GPU with nvFuser: `python -m scripts.nvfuser_acceptance`.

Prints, in a few minutes on a GPU:
1. GELU-backward math at [16, 512, 4096] f32, jitted (plain PyTorch) vs the same math written by
   hand as a FusionDefinition: median CUDA-event time with the L2 flushed, their ratio
   (target <= 1.05), effective bandwidth, fusion and kernel counts.
2. split3 over 20 split sizes (numbers="symbolic"): retraces, FusionDefinitions, nvFuser compilations.
3. An in-place Adam step over 32 parameters of 1024x1024 f32: fusions, kernels per step, whether
   any standalone copy kernel appears, time per step, and agreement with torch.optim.Adam.
   Needs the in-place ops of issue 3; without them it says so and skips.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

import compiler
from compiler import examine
from compiler.executors.nvfuser.executor import region_fusions, unavailable_reason
from fusebench.measure.timing import DeviceTimer, L2Flusher
from suites.adam_step import BETA1, BETA2, EPS, LR, adam_step
from suites.gelu_backward import SCALARS, define_gelu_bias_backward, gelu_bias_backward

HYPER = (LR, BETA1, BETA2, EPS)

DEVICE = "cuda"


def median_ms(fn: Callable[[], Any], repeats: int = 30) -> float:
    """Median device time of `fn()` in ms (the harness's CUDA-event timer, L2 flushed before each)."""
    device = torch.device(DEVICE)
    timer, flusher = DeviceTimer(device), L2Flusher(device)
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        flusher.flush()
        times.append(timer.time(fn) * 1e3)
    return statistics.median(times)


def cuda_kernels(fn: Callable[[], Any]) -> list[str]:
    """Names of the CUDA kernels one call of `fn` launches."""
    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


# ---------------------------------------------------------------------------------------------
# 1. GELU backward


def gelu_section(shape: tuple[int, ...]) -> None:
    import nvfuser_direct

    scalars = SCALARS
    tensors = [torch.randn(*shape, device=DEVICE) for _ in range(3)]
    jfn = compiler.jit(gelu_bias_backward)
    started = time.perf_counter()
    got = jfn(*scalars, *tensors)
    compile_s = time.perf_counter() - started
    want = gelu_bias_backward(*scalars, *tensors)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-3)

    with nvfuser_direct.FusionDefinition() as fd:
        define_gelu_bias_backward(fd, torch.float32)
    by_hand = fd.execute([*scalars, *tensors])
    for g, w in zip(by_hand, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-3)

    jit_ms = median_ms(lambda: jfn(*scalars, *tensors))
    hand_ms = median_ms(lambda: fd.execute([*scalars, *tensors]))
    moved = 4 * tensors[0].numel() * 4
    fusions = region_fusions(compiler.last_traces(jfn)[-1])
    reports = examine.segments(jfn)
    # NOTE: torch.profiler, not nvFuser's PythonProfiler: only one CUPTI subscriber may exist
    # in a process, and the Adam section counts kernels with torch.profiler.
    hand_kernels = len(cuda_kernels(lambda: fd.execute([*scalars, *tensors])))
    print(f"[gelu] shape {list(shape)} f32, first call (trace + nvFuser compile) {compile_s:.2f} s")
    print(f"[gelu] jitted:       {jit_ms:.4f} ms  ({moved / jit_ms / 1e9:.2f} TB/s)  fusions={len(fusions)}  "
          f"kernels={sum(len(r.kernels) for r in reports)}")  # fmt: skip
    print(f"[gelu] hand-written: {hand_ms:.4f} ms  ({moved / hand_ms / 1e9:.2f} TB/s)  kernels={hand_kernels}")
    ratio = jit_ms / hand_ms
    print(f"[gelu] ratio jitted / hand-written = {ratio:.3f}  (target <= 1.05: {'PASS' if ratio <= 1.05 else 'FAIL'})")
    print("[gelu] segments:\n" + "\n".join("    " + line for line in str(reports).splitlines()))


# ---------------------------------------------------------------------------------------------
# 2. split3


def split3(a, d0, d1):
    """Three slices with symbolic bounds, verbatim from issue 2."""
    d2 = a.size(2) - d0 - d1
    x, y, z = torch.split(a, (d0, d1, d2), dim=2)
    return x * 2, y + 1, z.sin()


def split3_section() -> None:
    jfn = compiler.jit(split3, numbers="symbolic")
    a = torch.randn(8, 16, 4096, device=DEVICE)
    started = time.perf_counter()
    for d0 in range(1, 21):
        for got, want in zip(jfn(a, d0, 8), split3(a, d0, 8)):
            torch.testing.assert_close(got, want)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    stats, cache = examine.stats(jfn), compiler.cache_stats(jfn)
    print(
        f"[split3] 20 split sizes in {seconds:.2f} s: traces={cache.misses}  fusions="
        f"{len(region_fusions(compiler.last_traces(jfn)[-1]))}  FusionDefinitions={stats.definitions}  "
        f"nvFuser compilations={stats.compilations}  deferred={stats.deferred}  fallbacks={stats.fallbacks}  "
        "all outputs match eager"
    )


# ---------------------------------------------------------------------------------------------
# 3. Adam step, in place


def adam_section(count: int, size: int, fusion: dict | None = None) -> int:
    """Runs and reports the Adam part; returns the number of fusions that fell back to torch."""
    params = [torch.randn(size, size, device=DEVICE) for _ in range(count)]
    grads = [torch.randn_like(p) for p in params]
    exp_avgs = [torch.zeros_like(p) for p in params]
    exp_avg_sqs = [torch.zeros_like(p) for p in params]
    reference = [torch.nn.Parameter(p.clone()) for p in params]
    optimizer = torch.optim.Adam(reference, lr=LR, betas=(BETA1, BETA2), eps=EPS, foreach=False)
    jfn = compiler.jit(adam_step, numbers="symbolic", fusion=fusion)
    started = time.perf_counter()
    jfn(params, grads, exp_avgs, exp_avg_sqs, 1, *HYPER)
    compile_s = time.perf_counter() - started
    for r, g in zip(reference, grads):
        r.grad = g.clone()
    optimizer.step()
    for step in range(2, 4):
        jfn(params, grads, exp_avgs, exp_avg_sqs, step, *HYPER)
        optimizer.step()
    worst = max((p - r.detach()).abs().max().item() for p, r in zip(params, reference))
    names = cuda_kernels(lambda: jfn(params, grads, exp_avgs, exp_avg_sqs, 4, *HYPER))
    copies = [n for n in names if "copy" in n.lower()]
    step_ms = median_ms(lambda: jfn(params, grads, exp_avgs, exp_avg_sqs, 5, *HYPER), repeats=20)
    stats = examine.stats(jfn)
    fusions = region_fusions(compiler.last_traces(jfn)[-1])
    print(f"[adam] {count} params of {size}x{size} f32, fusion options {fusion or 'default'}: "
          f"first call {compile_s:.2f} s, {step_ms:.4f} ms/step, "
          f"max |param - torch.optim.Adam| = {worst:.2e} after 3 steps")  # fmt: skip
    print(f"[adam] fusions={len(fusions)} (target <= {count}; 1 is best)  kernels/step={len(names)}  "
          f"nvFuser kernels={sum(1 for n in names if 'nvfuser' in n.lower())}  "
          f"standalone copy kernels={len(copies)} {copies[:3]}  fallbacks={stats.fallbacks}  "
          f"retraces={compiler.cache_stats(jfn).misses}")  # fmt: skip
    return stats.fallbacks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller shapes (a smoke run)")
    args = parser.parse_args(argv)
    reason = unavailable_reason()
    if reason is not None:
        print(f"nvFuser is unavailable here: {reason}")
        return 1
    import nvfuser_direct

    print(f"torch {torch.__version__} | nvfuser_direct {nvfuser_direct.version()} | {torch.cuda.get_device_name(0)}")
    started = time.perf_counter()
    gelu_section((4, 128, 1024) if args.quick else (16, 512, 4096))
    split3_section()
    count, size = (4, 256) if args.quick else (32, 1024)
    if adam_section(count, size):
        print("[adam] a fusion fell back to torch; again with at most 64 tensors per fusion:")
        adam_section(count, size, {"max_region_tensors": 64})
    print(f"done in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
