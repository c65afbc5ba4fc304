"""One Adam step over a list of parameters, in place, and torch.optim.Adam as baselines.

`adam_step` updates params, exp_avgs and exp_avg_sqs in place with torch.optim.Adam's formulas
(no weight decay, no amsgrad), the step number and hyper-parameters being Python numbers. Two
parameter sets: 32 matrices of 1024 x 1024, and the mixed sizes of a GPT-2 small (124M
parameters in 148 tensors, from 768-element LayerNorm weights to the 50304 x 768 embedding).

Baselines: torch.optim.Adam with foreach=False (a per-tensor loop), foreach=True (multi-tensor
kernels) and fused=True, set up on the same tensors (grads attached, state pointing at the same
exp_avg / exp_avg_sq tensors, state step = step - 1, so their first step() is this step).
NOTE: an optimizer's step counter advances with every timed call, which changes only the bias
corrections (scalars), not the work; correctness is checked on the first call, where it is right.

Bytes: every element of params, grads, exp_avgs, exp_avg_sqs read once, of params, exp_avgs,
exp_avg_sqs written once: 7 x elements x element size.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from fusebench.cases import Case, Compiled, Params, Target, Variant, dtype_named, generator, random_tensor
from fusebench.cases.variants import fusebench_prepare
from fusebench.integrations.asv_adapter import asv_benchmarks

STEP = 10
LR, BETA1, BETA2, EPS = 1e-3, 0.9, 0.999, 1e-8


def gpt_shapes(vocab: int, block: int, layers: int, width: int) -> list[tuple[int, ...]]:
    """Parameter shapes of a GPT-2 style model (tied embedding, LayerNorm with bias)."""
    shapes: list[tuple[int, ...]] = [(vocab, width), (block, width)]
    for _ in range(layers):
        shapes += [(width,), (width,), (3 * width, width), (3 * width,), (width, width), (width,)]
        shapes += [(width,), (width,), (4 * width, width), (4 * width,), (width, 4 * width), (width,)]
    return shapes + [(width,), (width,)]


PARAMETER_SETS: dict[str, list[tuple[int, ...]]] = {
    "32x1024x1024": [(1024, 1024)] * 32,
    "gpt2-small": gpt_shapes(vocab=50304, block=1024, layers=12, width=768),
    "4x256x256": [(256, 256)] * 4,
    "gpt-tiny": gpt_shapes(vocab=512, block=64, layers=2, width=64),
}


def adam_step(
    params: list[torch.Tensor],
    grads: list[torch.Tensor],
    exp_avgs: list[torch.Tensor],
    exp_avg_sqs: list[torch.Tensor],
    step: int,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
) -> None:
    """Adam's update, in place, as torch.optim.Adam computes it for one step number."""
    bias_correction1 = 1 - beta1**step
    bias_correction2_sqrt = (1 - beta2**step) ** 0.5
    step_size = lr / bias_correction1
    for param, grad, exp_avg, exp_avg_sq in zip(params, grads, exp_avgs, exp_avg_sqs):
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
        param.addcdiv_(exp_avg, denom, value=-step_size)


def _inputs(params: Params, device: torch.device, seed: int) -> tuple:
    gen = generator(seed)
    dtype = dtype_named(params["dtype"])
    shapes = PARAMETER_SETS[params["parameters"]]

    def tensors(scale: float, positive: bool = False) -> list[torch.Tensor]:
        made = [random_tensor(shape, dtype, device, gen, scale) for shape in shapes]
        return [t.abs_() for t in made] if positive else made

    return tensors(1.0), tensors(1.0), tensors(0.1), tensors(0.01, positive=True), STEP, LR, BETA1, BETA2, EPS


def _bytes(params: Params) -> int:
    elements = sum(math.prod(shape) for shape in PARAMETER_SETS[params["parameters"]])
    return 7 * elements * dtype_named(params["dtype"]).itemsize


def _optimizer_variant(name: str, **flags: bool) -> Variant:
    def prepare(target: Target) -> Compiled:
        params, grads, exp_avgs, exp_avg_sqs, step, lr, beta1, beta2, eps = target.args
        optimizer = torch.optim.Adam(params, lr=lr, betas=(beta1, beta2), eps=eps, **flags)
        for param, grad, exp_avg, exp_avg_sq in zip(params, grads, exp_avgs, exp_avg_sqs):
            param.grad = grad
            step_device = param.device if flags.get("fused") else torch.device("cpu")
            optimizer.state[param] = {
                "step": torch.tensor(float(step - 1), dtype=torch.float32, device=step_device),
                "exp_avg": exp_avg,
                "exp_avg_sq": exp_avg_sq,
            }

        def run(*args: Any) -> None:
            optimizer.step()

        return Compiled(run, keeps_state=True)  # NOTE: its state's step count goes on from call to call

    settings = ", ".join(f"{key}={value}" for key, value in flags.items())
    return Variant(name, prepare, description=f"torch.optim.Adam({settings})", reusable=True)


OPTIMIZER_VARIANTS = (
    _optimizer_variant("torch.optim(foreach=False)", foreach=False),
    _optimizer_variant("torch.optim(foreach=True)", foreach=True),
    _optimizer_variant("torch.optim(fused=True)", fused=True),
)
# The other fusion strategy of an optimizer step: `fusebench` keeps one region per parameter,
# identical ones sharing one nvFuser definition (one compilation per structure); this merges
# same-shape parameters into one region per shape (few large fusions whose nvFuser compiles take
# far longer than the per-parameter ones: measured with --all or --variant, not by a default run).
MERGED_VARIANTS = (
    Variant(
        "fusebench(merged same-shape)",
        fusebench_prepare(None, fusion={"merge_same_shape": True}),
        description="our compiler, same-shape parameters in one fusion (FusionOptions(merge_same_shape=True))",
        default=False,
    ),
)

CASES = [
    Case(
        name="adam_step",
        fn=adam_step,
        make_inputs=_inputs,
        bytes_moved=_bytes,
        params={"parameters": ["32x1024x1024", "gpt2-small"], "dtype": ["float32"]},
        quick_params={"parameters": ["4x256x256", "gpt-tiny"], "dtype": ["float32"]},
        mutated_args=(0, 2, 3),
        extra_variants=OPTIMIZER_VARIANTS + MERGED_VARIANTS,
        description="one in-place Adam step over a list of parameters, and torch.optim.Adam baselines",
    )
]

# ASV sees each case as benchmarks '<suite>.<case>.<metric>' (fusebench/integrations/asv_adapter.py).
globals().update(asv_benchmarks(__name__, CASES))
