"""softmax, log_softmax, logsumexp and cross_entropy under autodiff: the max shift is a stop-gradient (no amax
gradient in the backward), and cross_entropy with class indices never builds the [N, C]
log-probabilities: the forward keeps per-row statistics, the backward is softmax - onehot."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import compiler
from compiler.executors.nvfuser.executor import region_fusions
from compiler.prims import REDUCTIONS, Prim
from tests.support.autodiff_util import check_gradients
from tests.support.nvfuser_helpers import fake_nvfuser  # noqa: F401 - a fixture

DTYPES = [torch.float32, torch.bfloat16]
SEEDS = range(3)


def logits(n, classes, *, dtype=torch.float32, seed=0, scale=1.0, masked=False):
    x = torch.randn(n, classes, generator=torch.Generator().manual_seed(seed)) * scale
    if masked:  # a few -inf logits in every row (never a whole row)
        x[:, ::3] = -math.inf
    return x.to(dtype)


def targets(n, classes, seed=0, ignored=True):
    target = torch.randint(0, classes, (n,), generator=torch.Generator().manual_seed(seed + 100))
    if ignored:
        target[::4] = -100
    return target


def prims_in(trace) -> list[Prim]:
    return [b.sym for b in trace.bsyms]


def backward_of(jfn):
    return compiler.last_backward_traces(jfn)[-1]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", [torch.softmax, torch.log_softmax], ids=lambda f: f.__name__)
@pytest.mark.parametrize("case", ["plain", "large", "masked"])
def test_softmax_gradients_match_eager_and_the_backward_has_no_amax_gradient(op, case, dtype):
    def fn(x):
        return op(x, -1)

    for seed in SEEDS:
        x = logits(5, 9, dtype=dtype, seed=seed, scale=1e4 if case == "large" else 3.0, masked=case == "masked")
        jfn = check_gradients(fn, [x], seed=seed)
    backward = prims_in(backward_of(jfn))
    # NOTE: amax's own rule would add an equality mask and two reductions (ties and their sum).
    assert Prim.EQ not in backward and Prim.AMAX not in backward
    assert [p for p in backward if p in REDUCTIONS] == [Prim.SUM]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", ["plain", "large", "masked"])
def test_logsumexp_gradients_match_eager_and_its_backward_reduces_nothing(case, dtype):
    def fn(x):
        return torch.logsumexp(x, -1), x.logsumexp((0, 1), keepdim=True)

    for seed in SEEDS:
        x = logits(5, 9, dtype=dtype, seed=seed, scale=1e4 if case == "large" else 3.0, masked=case == "masked")
        jfn = check_gradients(fn, [x], seed=seed)
    backward = backward_of(jfn)
    assert Prim.AMAX not in prims_in(backward)
    # NOTE: the keepdim output's cotangent, [1, 1], is reshaped to a scalar, not summed over its unit dims
    assert [b.args[0].shape for b in backward.bsyms if b.sym in REDUCTIONS] == []


def test_logsumexp_of_rows_of_infinities_and_empty_slices_matches_eager():
    x = torch.tensor([[-math.inf, -math.inf], [math.inf, 1.0], [2.0, -math.inf]])
    jfn = compiler.jit(lambda x, empty: (torch.logsumexp(x, 1), torch.logsumexp(empty, 0), torch.logsumexp(x[0, 0], 0)))
    empty = torch.empty(0, 3)
    for got, want in zip(jfn(x, empty), (torch.logsumexp(x, 1), torch.logsumexp(empty, 0), x[0, 0])):
        torch.testing.assert_close(got, want)


def test_log_softmax_of_the_largest_finite_magnitudes():
    x = torch.tensor([[3e38, 3e38, -3e38], [1e30, 0.0, -1e30]])
    check_gradients(lambda x: torch.log_softmax(x, 1), [x])


LOSSES = {
    "ignore_index": lambda x, t: F.cross_entropy(x, t, ignore_index=-100),
    "sum": lambda x, t: F.cross_entropy(x, t, reduction="sum"),
    "none": lambda x, t: F.cross_entropy(x, t, reduction="none", ignore_index=-100),
    "weight": lambda x, t, w: F.cross_entropy(x, t, weight=w, ignore_index=-100),
    "weight_none": lambda x, t, w: F.cross_entropy(x, t, weight=w, reduction="none", ignore_index=-100),
    "ignore_2": lambda x, t: F.cross_entropy(x, t, ignore_index=2),
    "smoothing": lambda x, t, w: F.cross_entropy(x, t, weight=w, label_smoothing=0.1, ignore_index=-100),
    "probabilities": lambda x, p: F.cross_entropy(x, torch.softmax(p, 1), label_smoothing=0.2),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_cross_entropy_gradients_match_eager(name, dtype):
    loss = LOSSES[name]
    for seed, (n, classes) in zip(SEEDS, [(8, 5), (17, 33), (2, 7)]):
        generator = torch.Generator().manual_seed(seed)
        args = [logits(n, classes, dtype=dtype, seed=seed, scale=4.0)]
        if name == "probabilities":
            args.append(torch.randn(n, classes, generator=generator).to(dtype))
        else:
            args.append(targets(n, classes, seed, ignored=name not in ("sum", "ignore_2")))
        if name in ("weight", "weight_none", "smoothing"):
            args.append((torch.rand(classes, generator=generator) + 0.1).to(dtype))
        # NOTE: eager takes no gradient for weights or targets
        check_gradients(loss, args, [True] + [False] * (len(args) - 1), seed=seed)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cross_entropy_over_extra_dims_large_logits_and_masked_classes(dtype):
    def loss(x, t):
        return F.cross_entropy(x, t, ignore_index=-100)

    for seed in SEEDS:
        x = torch.randn(2, 6, 3, 4, generator=torch.Generator().manual_seed(seed)).to(dtype)  # (N, C, d1, d2)
        t = torch.randint(0, 6, (2, 3, 4), generator=torch.Generator().manual_seed(seed))
        t[0, 1] = -100
        check_gradients(loss, [x, t], seed=seed)
        check_gradients(loss, [logits(6, 11, dtype=dtype, seed=seed, scale=1e4), targets(6, 11, seed)], seed=seed)
        masked = logits(6, 12, dtype=dtype, seed=seed, masked=True)
        on_finite_logits = targets(6, 4, seed, ignored=False) * 3 + 1
        check_gradients(loss, [masked, on_finite_logits], seed=seed)
    single = torch.randn(7).to(dtype)  # (C,) and a 0-d target
    check_gradients(loss, [single, torch.tensor(3)])


def cross_entropy(x, t):
    return F.cross_entropy(x, t, ignore_index=-100)


def test_cross_entropy_saves_the_logits_and_row_statistics_and_its_backward_reduces_nothing():
    x, t = logits(16, 50, dtype=torch.bfloat16).requires_grad_(), targets(16, 50)
    jfn = compiler.jit(cross_entropy)
    jfn(x, t).backward()
    saved = compiler.examine.saved_for_backward(jfn)
    assert [(v.shape, v.dtype) for v in saved if isinstance(v.dtype, torch.dtype)] == [
        ((16, 50), torch.bfloat16),  # the logits, as given
        ((16,), torch.int64),  # the targets
        ((16,), torch.float32),  # row max
        ((16,), torch.float32),  # row sum of exp(x - max)
        ((), torch.float32),  # the total weight (mean)
    ]
    forward, backward = compiler.last_traces(jfn)[-1], backward_of(jfn)
    full_size = [b.sym for b in forward.bsyms if tuple(getattr(b.output, "shape", ())) == (16, 50)]
    # no log_softmax: the upcast logits, the broadcast max, x - max and its exp are all
    assert full_size == [Prim.CONVERT_ELEMENT_TYPE, Prim.BROADCAST_IN_DIM, Prim.SUB, Prim.EXP]
    assert [p for p in prims_in(backward) if p in REDUCTIONS] == []


def test_cross_entropy_is_one_fusion_forward_and_one_backward(fake_nvfuser):  # noqa: F811
    x, t = logits(64, 300, dtype=torch.bfloat16).requires_grad_(), targets(64, 300)
    jfn = compiler.jit(cross_entropy, executors=["nvfuser", "torch"], fallback=False)
    out = jfn(x, t)
    out.backward()
    expected = x.detach().clone().requires_grad_()
    cross_entropy(expected, t).backward()
    torch.testing.assert_close(out, cross_entropy(expected, t), atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(x.grad, expected.grad, atol=2e-2, rtol=2e-2)
    forward, backward = compiler.last_traces(jfn)[-1], backward_of(jfn)
    (forward_fusion,), (backward_fusion,) = region_fusions(forward), region_fusions(backward)
    assert all(getattr(b.sym, "executor", None) == "nvfuser" for t in (forward, backward) for b in t.bsyms)
    region = forward_fusion.region
    reduced = [(b.sym, b.args[1]) for b in region.bsyms if b.sym in REDUCTIONS]
    # the row max, the row sum of exps, then the sums over rows: loss and total weight
    assert reduced == [(Prim.AMAX, (1,)), (Prim.SUM, (1,)), (Prim.SUM, (0,)), (Prim.SUM, (0,))]
    (gather,) = [b for b in region.bsyms if b.sym is Prim.TAKE_ALONG_DIM]
    assert gather.args[0] in region.inputs and tuple(gather.output.shape) == (64, 1)  # from the logits as given
    assert Prim.STOP_GRADIENT not in prims_in(forward) and Prim.EQ not in [b.sym for b in region.bsyms]
    assert [b.sym for b in backward_fusion.region.bsyms if b.sym in REDUCTIONS] == []
    assert [tuple(p.shape) for p in backward_fusion.region.outputs] == [(64, 300)]


def gpt2_loss(x, t):
    return F.cross_entropy(x.view(-1, x.size(-1)), t.view(-1), ignore_index=-1)


def test_gpt2s_loss_reads_its_reshaped_logits_from_torch(fake_nvfuser):  # noqa: F811
    # inside the fusion, the reshapes of the [b, s, vocab] logits and [b, s] targets made nvFuser
    # split the loss into 4 kernels on an H200 (2 as a 2-D caller's); torch makes them as views
    for seed in SEEDS:
        x = logits(64, 300, dtype=torch.bfloat16, seed=seed, scale=4.0).view(2, 32, 300)
        t = targets(64, 300, seed).view(2, 32)
        t[t == -100] = -1
        jfn = compiler.jit(gpt2_loss, executors=["nvfuser", "torch"], fallback=False)
        check_gradients(gpt2_loss, [x, t], [True, False], jfn=jfn, seed=seed)
        forward, backward = compiler.last_traces(jfn)[-1], backward_of(jfn)
        outside = [b.sym for b in forward.bsyms if not getattr(b.sym, "executor", None)]
        assert outside == [Prim.RESHAPE, Prim.RESHAPE]
        (fusion,) = region_fusions(forward)
        assert Prim.RESHAPE not in [b.sym for b in fusion.region.bsyms]
        assert sorted(tuple(p.shape) for p in fusion.region.inputs) == [(64,), (64, 300)]
        assert len(region_fusions(backward)) == 1


def causal_lm_loss(x, labels):
    """transformers' causal-LM loss: labels padded with the ignored index, shifted by one."""
    shifted = F.pad(labels, (0, 1), value=-100)[..., 1:].contiguous()
    return F.cross_entropy(x.float().view(-1, x.size(-1)), shifted.view(-1), ignore_index=-100)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_a_causal_lms_label_shift_runs_outside_the_loss_fusions(dtype, fake_nvfuser):  # noqa: F811
    # in the fusion, the pad (a cat) and the shift (a slice) of the [b, s] labels made nvFuser run
    # the loss over the [b * s, vocab] logits as several kernels, forward and backward
    for seed in SEEDS:
        x = logits(64, 300, dtype=dtype, seed=seed, scale=4.0).view(2, 32, 300)
        labels = targets(64, 300, seed).view(2, 32)
        jfn = compiler.jit(causal_lm_loss, executors=["nvfuser", "torch"], fallback=False)
        check_gradients(causal_lm_loss, [x, labels], [True, False], jfn=jfn, seed=seed)
        forward, backward = compiler.last_traces(jfn)[-1], backward_of(jfn)
        for trace in (forward, backward):
            (fusion,) = region_fusions(trace)
            assert not {Prim.CAT, Prim.SLICE} & {b.sym for b in fusion.region.bsyms}
        assert Prim.CAT in [b.sym for b in forward.bsyms]  # torch pads the labels
        # the one slice left is the shift; the gradient of the one logit each row picks takes the
        # whole index (a one-hot), no slice of it
        (shift,) = [b for b in backward.bsyms if b.sym is Prim.SLICE]
        assert tuple(shift.args[0].shape) == (2, 33)


def test_a_resize_of_a_large_value_stays_in_its_fusion(fake_nvfuser):  # noqa: F811
    def rotate_half(x):
        first, second = x.chunk(2, dim=-1)
        return (torch.cat((-second, first), dim=-1) * 2.0).softmax(-1)

    x = logits(64, 300, seed=1)
    jfn = compiler.jit(rotate_half, executors=["nvfuser", "torch"], fallback=False)
    torch.testing.assert_close(jfn(x), rotate_half(x))
    (fusion,) = region_fusions(compiler.last_traces(jfn)[-1])
    assert {Prim.CAT, Prim.SLICE} <= {b.sym for b in fusion.region.bsyms}
