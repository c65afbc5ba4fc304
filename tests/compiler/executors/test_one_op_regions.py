"""Regions that are one torch op's decomposition run on CPU as that op's ATen call, inline in the
computation, and match eager; any other region is still compiled by Inductor.

Recognising a region traces a handful of candidates (milliseconds) and compiles nothing, so these
tests are fast; the one test that needs a compiled region compiles one small one.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import compiler
from compiler.executors.inductor import InductorFusion, inductor_fusions, unavailable_reason
from compiler.executors.nvfuser import region_fusions
from compiler.executors.one_op_regions import OneOpRegion, one_op_call

pytestmark = pytest.mark.skipif(unavailable_reason() is not None, reason=f"{unavailable_reason()}")

INDUCTOR = ["inductor", "torch"]
BF16 = torch.bfloat16


def _region(jfn: compiler.JittedFunction) -> InductorFusion | OneOpRegion:
    (region,) = inductor_fusions(compiler.last_traces(jfn)[-1])
    return region


def _tensors(seed: int, shape: tuple[int, ...], dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=gen) * 3).to(dtype)
    return x, torch.randn(shape[-1:], generator=gen).to(dtype), torch.randn(shape[-1:], generator=gen).to(dtype)


# (program, what it runs as, its inputs from (x, w, b))
PROGRAMS = [
    (lambda x, w, b: torch.softmax(x, -1), "softmax(x, 1)", lambda x, w, b: (x,)),
    (lambda x, w, b: torch.softmax(x.float(), 0), "softmax(x, 0{upcast})", lambda x, w, b: (x,)),
    (lambda x, w, b: x.log_softmax(dim=1), "log_softmax(x, 1)", lambda x, w, b: (x,)),
    (
        lambda x, w, b: F.layer_norm(x, x.shape[-1:], w, b, 1e-5),
        "layer_norm(x, [8], eps=1e-05)",
        lambda x, w, b: (x, w, b),
    ),
    (lambda x, w, b: F.layer_norm(x, x.shape[-1:], eps=1e-6), "layer_norm(x, [8], eps=1e-06)", lambda x, w, b: (x,)),
    (lambda x, w, b: F.gelu(x, approximate="tanh"), "gelu(x, approximate='tanh')", lambda x, w, b: (x,)),
    (lambda x, w, b: F.gelu(x), "gelu(x, approximate='none')", lambda x, w, b: (x,)),
    (lambda x, w, b: F.silu(x) * w, "silu(gate) * up", lambda x, w, b: (x, w.expand_as(x).contiguous())),
]


@pytest.mark.parametrize(("program", "runs_as", "pick"), PROGRAMS, ids=[p[1] for p in PROGRAMS])
@pytest.mark.parametrize(("shape", "dtype"), [((4, 8), torch.float32), ((3, 8), BF16), ((1, 8), torch.float32)])
def test_one_op_regions_run_as_that_op_and_match_eager(program, runs_as, pick, shape, dtype) -> None:
    fn = lambda *args: program(*args, *(None,) * (3 - len(args)))
    jfn = compiler.jit(fn, executors=INDUCTOR, fallback=False)
    for seed in range(2):
        args = pick(*_tensors(seed, shape, dtype))
        torch.testing.assert_close(jfn(*args), fn(*args), atol=0, rtol=0)  # the very op eager runs
    runs_as = runs_as.format(upcast="" if dtype is torch.float32 else ", dtype=torch.float32")
    region = _region(jfn)
    assert isinstance(region, OneOpRegion) and region.runs_as == f"torch ({runs_as})"
    assert compiler.examine.stats(jfn).compiled == 0  # nothing went to Inductor
    assert f"runs with torch ({runs_as})" in str(compiler.examine.fusions(jfn))


@pytest.mark.parametrize("upcast", [False, True])
def test_cross_entropy_as_transformers_writes_it_runs_as_one_call(upcast: bool) -> None:
    def loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.float() if upcast else logits, target)

    jfn = compiler.jit(loss, executors=INDUCTOR, fallback=False)
    gen = torch.Generator().manual_seed(0)
    logits, target = torch.randn(6, 10, generator=gen).to(BF16), torch.randint(0, 10, (6,), generator=gen)
    target[2] = -100  # ignored, as by default
    torch.testing.assert_close(jfn(logits, target), loss(logits, target), atol=0, rtol=0)
    written = "logits.float()" if upcast else "logits"
    assert _region(jfn).runs_as == f"torch (cross_entropy({written}, target, reduction='mean'))"


def test_the_op_is_written_inline_in_the_computation() -> None:
    jfn = compiler.jit(lambda x: torch.softmax(x, -1), executors=INDUCTOR)
    jfn(torch.randn(2, 3))
    source = jfn.last_entry.computation.__fusebench_source__
    assert "softmax" in source and "region" not in source.split("# inductor0")[0].split("=")[-1]


@pytest.mark.parametrize(
    "program",
    [
        lambda x: torch.softmax(x, -1) * 2,  # softmax and one more op
        lambda x: torch.softmax(x, -1) + torch.softmax(x, 0),  # two ops
        lambda x: (x - x.amax(-1, keepdim=True)).exp() / 3,  # a softmax's prims, but not a softmax
    ],
)
def test_other_regions_are_not_taken_for_one_op(program) -> None:
    # NOTE: nvFuser's regions run with torch: the same partition, no compilation
    jfn = compiler.jit(program, executors=["nvfuser"], fusion={"runner": "torch"})
    jfn(torch.randn(4, 8))
    (fusion,) = region_fusions(compiler.last_traces(jfn)[-1])
    assert one_op_call(fusion.region) is None


@pytest.mark.slow  # an Inductor compilation
def test_a_region_beyond_one_op_is_compiled_by_inductor() -> None:
    program = lambda x: torch.softmax(x, -1) * 2
    jfn = compiler.jit(program, executors=INDUCTOR, fallback=False)
    x = torch.randn(4, 8)
    torch.testing.assert_close(jfn(x), program(x))
    assert isinstance(_region(jfn), InductorFusion) and compiler.examine.stats(jfn).compiled == 1


def _viewed(t: torch.Tensor) -> torch.Tensor:
    return t.view(2, t.shape[0] // 2, t.shape[1]).view(-1, t.shape[1])


# the forms user_patterns writes: the input viewed first, the result upcast after, inputs upcast first
FORMS = [
    # fold_conversions drops the reshape chain and the views stay outside the region: the op reads
    # the input itself
    (lambda x, w: _viewed(torch.softmax(_viewed(x), -1)), "softmax(x, 1)"),
    (lambda x, w: torch.log_softmax(x, -1).float(), "log_softmax(x, 1).float()"),
    (lambda x, w: F.gelu(x.float()), "gelu(x, approximate='none') of inputs [0] upcast"),
    (lambda x, w: F.silu(x.float()) * w.float(), "silu(gate) * up of inputs [0, 1] upcast"),
]


@pytest.mark.parametrize(("program", "runs_as"), FORMS, ids=[f[1] for f in FORMS])
def test_views_before_and_casts_around_the_op_run_with_it(program, runs_as) -> None:
    jfn = compiler.jit(program, executors=INDUCTOR, fallback=False)
    for seed in range(2):
        x, w, _ = _tensors(seed, (4, 8), BF16)
        torch.testing.assert_close(jfn(x, w), program(x, w), atol=0, rtol=0)
    assert _region(jfn).runs_as == f"torch ({runs_as})"
