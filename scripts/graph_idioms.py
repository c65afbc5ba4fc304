"""Whether CUDA graphs win on the training loops people write: `python -m scripts.graph_idioms
[--idioms rmsnorm,mlp,adam] [--device cuda] [--steps 40] [--small]`.

Each idiom is a training loop as written outside the suites, run as one step per call:
- rmsnorm: an RMSNorm forward and backward (8192 x 4096 bf16), `.grad = None` before each step;
- mlp: a 4-layer pre-norm GELU MLP (8 x 512 tokens, width 1024, bf16) whose loss is minimised by
  `torch.optim.AdamW(foreach=True)`, its state created lazily on the first step, under a
  `LambdaLR` schedule, `zero_grad(set_to_none=True)` after each step;
- adam: `suites.adam_step.adam_step` over GPT-2 small's parameters with a new step count and
  learning rate every call (a schedule: numbers read from device scalars under graphs).
For each it prints one line per variant, eager and the jitted function with `cuda_graphs` False
(ungraphed), None (automatic) and True: the median and fastest step in microseconds (CUDA events
around each step on CUDA, the wall clock on CPU; after warm-up steps, which compile and capture),
the first step's seconds, and what the graphs did (`compiler.examine.cuda_graphs`). The goal: the
automatic variant no slower than the ungraphed one on every idiom.
`--small` shrinks every size (a quick check that the loops run).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

import compiler
from fusebench.measure.timing import DeviceTimer

VARIANTS: dict[str, bool | str | None] = {"eager": "eager", "ungraphed": False, "automatic": None, "graphs": True}


class RMSNorm(nn.Module):
    """x / rms(x) * weight, computed in float32."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * self.weight


class MLP(nn.Module):
    """Pre-norm residual GELU blocks and a mean squared error against a target."""

    def __init__(self, width: int, layers: int) -> None:
        super().__init__()
        self.norms = nn.ModuleList(RMSNorm(width) for _ in range(layers))
        self.up = nn.ModuleList(nn.Linear(width, 4 * width, bias=False) for _ in range(layers))
        self.down = nn.ModuleList(nn.Linear(4 * width, width, bias=False) for _ in range(layers))

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        for norm, up, down in zip(self.norms, self.up, self.down):
            x = x + down(F.gelu(up(norm(x)), approximate="tanh"))
        return F.mse_loss(x.float(), target)


def _compiled(fn: Callable, variant: bool | str | None) -> Callable:
    return fn if variant == "eager" else compiler.jit(fn, cuda_graphs=variant)


def rmsnorm(variant: bool | str | None, device: torch.device, small: bool) -> tuple[Callable[[], None], Any]:
    """The RMSNorm step (see the module) and its compiled function."""
    rows, width = (64, 32) if small else (8192, 4096)
    norm = RMSNorm(width).to(device, torch.bfloat16)
    x = torch.randn(rows, width, device=device, dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn(rows, width, device=device, dtype=torch.bfloat16)
    fn = _compiled(norm, variant)

    def step() -> None:
        norm.weight.grad = x.grad = None
        fn(x).backward(grad)

    return step, fn


def mlp(variant: bool | str | None, device: torch.device, small: bool) -> tuple[Callable[[], None], Any]:
    """The MLP training step under AdamW and a schedule (see the module) and its compiled model."""
    batch, tokens, width = (2, 8, 32) if small else (8, 512, 1024)
    model = MLP(width, 4).to(device, torch.bfloat16)
    x = torch.randn(batch, tokens, width, device=device, dtype=torch.bfloat16)
    target = torch.randn(batch, tokens, width, device=device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda k: 0.99**k)
    fn = _compiled(model, variant)

    def step() -> None:
        fn(x, target).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        schedule.step()

    return step, fn


def adam(variant: bool | str | None, device: torch.device, small: bool) -> tuple[Callable[[], None], Any]:
    """GPT-2 small's Adam step with a new step count and learning rate every call."""
    from suites import adam_step

    parameters = {"parameters": "gpt-tiny" if small else "gpt2-small", "dtype": "float32"}
    params, grads, exp_avgs, exp_avg_sqs, step_count, lr, *betas_eps = adam_step._inputs(parameters, device, 0)
    fn = _compiled(adam_step.adam_step, variant)
    count = [step_count]

    def step() -> None:
        count[0] += 1
        fn(params, grads, exp_avgs, exp_avg_sqs, count[0], lr * 0.999 ** count[0], *betas_eps)

    return step, fn


IDIOMS: dict[str, Callable[..., tuple[Callable[[], None], Any]]] = {"rmsnorm": rmsnorm, "mlp": mlp, "adam": adam}


def step_times(step: Callable[[], None], device: torch.device, steps: int, warmup: int) -> list[float]:
    """Microseconds of each of `steps` calls of `step` after `warmup` calls (the harness's device
    timer: CUDA events on CUDA, the wall clock on CPU)."""
    for _ in range(warmup):
        step()
    timer = DeviceTimer(device)
    return [timer.time(step) * 1e6 for _ in range(steps)]


def measure(idiom: str, variant: str, device: torch.device, steps: int, small: bool) -> str:
    """One printed line: the idiom's step under the variant (see the module)."""
    torch.manual_seed(0)
    step, fn = IDIOMS[idiom](VARIANTS[variant], device, small)
    began = time.perf_counter()
    step()
    first = time.perf_counter() - began
    times = step_times(step, device, steps, warmup=8)
    line = f"{idiom:8} {variant:10} median {statistics.median(times):10.1f} us  fastest {min(times):10.1f} us"
    line += f"  first step {first:6.2f} s"
    if VARIANTS[variant] in (None, True):
        line += "  | " + " / ".join(str(compiler.examine.cuda_graphs(fn)).splitlines())
    return line


def main(argv: list[str] | None = None) -> int:
    """Prints one line per (idiom, variant)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idioms", default=",".join(IDIOMS), help=f"comma-separated, of {', '.join(IDIOMS)}")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=40, help="timed steps per variant")
    parser.add_argument("--small", action="store_true", help="tiny sizes: a quick check that the loops run")
    args = parser.parse_args(argv)
    idioms = [name.strip() for name in args.idioms.split(",") if name.strip()]
    unknown = [name for name in idioms if name not in IDIOMS]
    if unknown or not idioms:
        parser.error(f"--idioms: {', '.join(unknown) or 'none given'}; expected some of {', '.join(IDIOMS)}")
    device = torch.device(args.device)
    for idiom in idioms:
        for variant in VARIANTS:
            if VARIANTS[variant] is True and device.type != "cuda":
                print(f"{idiom:8} {variant:10} skipped: jit(cuda_graphs=True) needs a CUDA device, not {device}")
                continue
            print(measure(idiom, variant, device, args.steps, args.small), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
