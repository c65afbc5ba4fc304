"""one_hot_scatters: for nvFuser, a scatter-add of a few whole columns into a tensor is written as
one-hot masks added to it (same values, no scatter left to split the fusion); a gather's gradient
is a scatter-add into the other terms of the gradient (`autodiff`), compiled by Inductor on CPU."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import compiler
from compiler import prims
from compiler.executors.inductor import inductor_fusions
from compiler.passes.one_hot_scatters import MAX_COLUMNS, one_hot_scatters
from compiler.prims import Prim
from compiler.tracing.check_trace import check_trace
from compiler.tracing.interpreter import eval_trace
from tests.support.autodiff_util import check_gradients
from tests.support.nvfuser_helpers import fake_nvfuser, prim_trace  # noqa: F401 - a fixture

I64 = torch.int64


def _scatter(dim: int, reduce: str = "sum", include_self: bool = True):
    return lambda x, index, src: prims.scatter_reduce(x, dim, index, src, reduce, include_self)


def _flat(trace) -> list:
    """The trace's bound symbols, each region's prims in its place."""
    return [s for b in trace.bsyms for s in (b.subsymbols or (b,))]


def _prims(trace) -> list[Prim]:
    return [b.sym for b in trace.bsyms]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(
    ("shape", "dim", "columns"), [((6, 10), 1, 1), ((6, 10), 1, 3), ((5, 1, 7), 0, 2), ((1, 9), 1, 2)]
)
def test_a_scatter_add_of_a_few_whole_columns_is_one_hot_masks_with_the_same_values(shape, dim, columns, dtype):
    index_shape = [columns if d == dim else n for d, n in enumerate(shape)]
    trace = prim_trace(_scatter(dim), (shape, dtype), (index_shape, I64), (index_shape, dtype))
    rewritten = check_trace(one_hot_scatters(trace))
    assert Prim.SCATTER_REDUCE not in _prims(rewritten) and _prims(rewritten).count(Prim.EQ) == columns
    assert rewritten.output.name == trace.output.name
    for seed in range(3):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(shape, generator=g).to(dtype)
        index = torch.randint(0, shape[dim], index_shape, generator=g)  # repeated classes included
        src = torch.randn(index_shape, generator=g).to(dtype)
        want = torch.scatter_reduce(x.float(), dim, index, src.float(), "sum")
        got = eval_trace(rewritten, x, index, src)
        torch.testing.assert_close(got.float(), want, atol=2e-2 if dtype is torch.bfloat16 else 1e-6, rtol=1e-2)


@pytest.mark.parametrize(
    ("fn", "index_shape"),
    [
        (_scatter(1, "amax"), (6, 1)),  # not a sum
        (_scatter(1, "sum", include_self=False), (6, 1)),  # the tensor's own values left out
        (_scatter(1), (6, MAX_COLUMNS + 1)),  # too many columns: a full-size mask each
        (_scatter(1), (4, 1)),  # fewer rows than the tensor
    ],
)
def test_other_scatters_are_left_alone(fn, index_shape):
    trace = prim_trace(fn, ((6, 10), torch.float32), (index_shape, I64), (index_shape, torch.float32))
    assert one_hot_scatters(trace) is trace


def _target_logit_loss(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """A gather whose logits also feed a log-softmax: the gather's gradient joins another term."""
    return (x.log_softmax(-1).sum(-1) - x.gather(1, t).sum(-1)).mean()


@pytest.mark.parametrize("seed", range(3))
def test_a_gathers_gradient_is_scattered_into_the_other_terms_on_cpu(seed):
    g = torch.Generator().manual_seed(seed)
    x, t = torch.randn(8, 20, generator=g), torch.randint(0, 20, (8, 2), generator=g)
    jfn = check_gradients(_target_logit_loss, (x, t), (True, False), seed=seed)
    flat = _flat(compiler.last_backward_traces(jfn)[-1])
    (scatter,) = [b for b in flat if b.sym is Prim.SCATTER_REDUCE]
    producers = {b.output.name: b.sym for b in flat if hasattr(b.output, "name")}
    assert producers.get(scatter.args[0].name) is not Prim.FULL  # into the log-softmax's term, not into zeros


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_cross_entropys_backward_on_cpu_is_one_inductor_kernel_with_its_scatter(dtype):
    x, t = torch.randn(16, 50).to(dtype), torch.randint(0, 50, (16,))
    t[::4] = -100
    # NOTE: scaled first: a cross-entropy alone is one torch op, which runs with ATen's own backward
    loss = lambda x, t: F.cross_entropy(x * 2, t)
    jfn = compiler.jit(loss, executors=["inductor", "torch"])
    check_gradients(loss, (x, t), (True, False), jfn=jfn)
    backward = compiler.last_backward_traces(jfn)[-1]
    (fusion,) = inductor_fusions(backward)
    assert Prim.SCATTER_REDUCE in [b.sym for b in fusion.region.bsyms]
    assert Prim.IOTA not in [b.sym for b in fusion.region.bsyms]  # no one-hot mask over the classes


@pytest.mark.parametrize("columns", [1, 2])
def test_for_nvfuser_a_gathers_gradient_is_one_hot_masks_in_the_fusion(fake_nvfuser, columns):  # noqa: F811
    x, t = torch.randn(8, 20), torch.randint(0, 20, (8, columns))
    jfn = compiler.jit(_target_logit_loss, executors=["nvfuser", "torch"], fallback=False)
    check_gradients(_target_logit_loss, (x, t), (True, False), jfn=jfn)
    flat = [b.sym for b in _flat(compiler.last_backward_traces(jfn)[-1])]
    assert Prim.SCATTER_REDUCE not in flat and flat.count(Prim.EQ) == columns
