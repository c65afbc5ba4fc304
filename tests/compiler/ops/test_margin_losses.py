"""Margin and embedding losses (compiler/ops/margin_losses.py) against eager: every reduction, the
options (margin, p, eps, swap, weight, distance_function), strided inputs, float32 and bfloat16
where eager has a kernel, gradients of the inputs; the nn.*Loss modules; the argument errors."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import compiler
from tests.support.eager_match import assert_matches_eager

REDUCTIONS = ["none", "mean", "sum"]


def _data(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    a, b, c = torch.randn(3, 6, 4, generator=g)
    return {
        "a": a,
        "b": b,
        "c": c,
        "sign": (torch.randint(0, 2, (6,), generator=g) * 2 - 1).float(),
        "label": torch.randint(0, 4, (6,), generator=g),
        "labels": torch.tensor(
            [[3, 0, -1, 1], [0, 1, 2, 3], [-1, 0, 0, 0], [2, 2, -1, 0], [1, -1, 3, 3], [1, 2, 0, -1]]
        ),
        "weight": torch.rand(4, generator=g) + 0.1,
        "multi_hot": (torch.rand(6, 4, generator=g) > 0.5).float(),
    }


# name -> (fn of (data, reduction), argument names, frozen argument positions, eager has a bf16 kernel)
CASES = {
    "margin_ranking": (
        lambda a, b, t, r: F.margin_ranking_loss(a[:, 0], b.mT[0], t, 0.3, reduction=r),
        "a b sign",
        (2,),
        True,
    ),
    "margin_ranking 2-d": (
        lambda a, b, t, r: F.margin_ranking_loss(a, b, t[:, None].expand(6, 4), reduction=r),
        "a b sign",
        (2,),
        True,
    ),
    "hinge_embedding": (lambda a, t, r: F.hinge_embedding_loss(a, t[:, None], 0.5, reduction=r), "a sign", (1,), True),
    "soft_margin": (
        lambda a, t, r: F.soft_margin_loss(a.mT, t[None, :].expand(4, 6), reduction=r),
        "a sign",
        (1,),
        True,
    ),
    "cosine_embedding": (lambda a, b, t, r: F.cosine_embedding_loss(a, b, t, 0.2, reduction=r), "a b sign", (2,), True),
    "cosine_embedding 1-d": (
        lambda a, b, t, r: F.cosine_embedding_loss(a[0], b[1], t[0], reduction=r),
        "a b sign",
        (2,),
        True,
    ),
    "triplet": (lambda a, b, c, r: F.triplet_margin_loss(a, b, c, reduction=r), "a b c", (), True),
    "triplet swap": (
        lambda a, b, c, r: F.triplet_margin_loss(a, b[:, :1], c, 0.5, swap=True, reduction=r),
        "a b c",
        (),
        True,
    ),
    "triplet p=1": (lambda a, b, c, r: F.triplet_margin_loss(a, b, c, p=1, eps=1e-3, reduction=r), "a b c", (), False),
    "triplet p=3 1-d": (
        lambda a, b, c, r: F.triplet_margin_loss(a[0], b[0], c[0], p=3, reduction=r),
        "a b c",
        (),
        True,
    ),
    "multi_margin": (lambda a, t, r: F.multi_margin_loss(a, t, reduction=r), "a label", (), False),
    "multi_margin p=2 weight": (
        lambda a, t, w, r: F.multi_margin_loss(a.mT.mT, t, p=2, margin=0.7, weight=w, reduction=r),
        "a label weight",
        (2,),
        False,
    ),
    "multi_margin 1-d": (lambda a, t, r: F.multi_margin_loss(a[1], t[0], reduction=r), "a label", (), False),
    "multi_margin 1-d 1-d target": (
        lambda a, t, r: F.multi_margin_loss(a[1], t[:1], reduction=r),
        "a label",
        (),
        False,
    ),
    "multi_margin 0-d": (lambda a, t, r: F.multi_margin_loss(a[1, 0], t[0] * 0, reduction=r), "a label", (), False),
    "multilabel_margin": (lambda a, t, r: F.multilabel_margin_loss(a, t, reduction=r), "a labels", (), False),
    "multilabel_margin 1-d": (lambda a, t, r: F.multilabel_margin_loss(a[0], t[0], reduction=r), "a labels", (), False),
    "multilabel_margin 0-d": (
        lambda a, t, r: F.multilabel_margin_loss(a[0, 0], t[2, :1], reduction=r),
        "a labels",
        (),
        False,
    ),
    "multilabel_soft_margin": (
        lambda a, t, r: F.multilabel_soft_margin_loss(a, t, reduction=r),
        "a multi_hot",
        (1,),
        True,
    ),
    "multilabel_soft_margin weight": (
        lambda a, t, w, r: F.multilabel_soft_margin_loss(a, t, w, reduction=r),
        "a multi_hot weight",
        (1,),
        True,
    ),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_loss_matches_eager(name: str, reduction: str, seed: int, dtype: torch.dtype) -> None:
    fn, names, frozen, bf16 = CASES[name]
    if dtype == torch.bfloat16 and not bf16:
        pytest.skip("eager has no bfloat16 kernel for this loss")
    data = _data(seed)
    args = [data[n].to(dtype) if data[n].is_floating_point() else data[n] for n in names.split()]
    # NOTE: bf16 against eager in float32: eager rounds each step (a distance, a broadcast's summed
    # gradient) to bf16, which near a clamp's or minimum's tie decides the branch otherwise
    reference = torch.float32 if dtype == torch.bfloat16 else None
    assert_matches_eager(lambda *xs: fn(*xs, reduction), *args, frozen=frozen, seed=seed, reference=reference)


def test_legacy_size_average_and_reduce_flags_pick_the_reduction() -> None:
    data = _data(0)
    fn = lambda a, b, t: (
        F.margin_ranking_loss(a, b, t[:, None].expand(6, 4), size_average=False),
        F.soft_margin_loss(a, t[:, None].expand(6, 4), reduce=False),
    )
    assert_matches_eager(fn, data["a"], data["b"], data["sign"], frozen=(2,))


@pytest.mark.parametrize(
    ("module", "names"),
    [
        (torch.nn.MarginRankingLoss(0.1), "a b sign"),
        (torch.nn.HingeEmbeddingLoss(reduction="sum"), "a sign"),
        (torch.nn.CosineEmbeddingLoss(0.3), "a b sign"),
        (torch.nn.TripletMarginLoss(swap=True), "a b c"),
        (torch.nn.MultiMarginLoss(p=2), "a label"),
        (torch.nn.MultiLabelMarginLoss(), "a labels"),
        (torch.nn.MultiLabelSoftMarginLoss(reduction="none"), "a multi_hot"),
    ],
)
def test_nn_loss_modules_work_through_their_functional_forms(module: torch.nn.Module, names: str) -> None:
    data = _data(1)
    args = [data[n] for n in names.split()]
    if "sign" in names:
        args[-1] = args[-1] if isinstance(module, (torch.nn.CosineEmbeddingLoss,)) else args[-1][:, None].expand(6, 4)
    if isinstance(module, torch.nn.MarginRankingLoss):
        args = [args[0][:, 0], args[1][:, 0], data["sign"]]
    torch.testing.assert_close(compiler.jit(module)(*args), module(*args))


def test_argument_errors_match_eager() -> None:
    with pytest.raises(RuntimeError, match="All input tensors should have same dimension"):
        compiler.jit(F.margin_ranking_loss)(torch.randn(3), torch.randn(3), torch.randn(3, 1))
    with pytest.raises(ValueError, match="only p == 1 and p == 2 supported"):
        compiler.jit(lambda a, t: F.multi_margin_loss(a, t, p=3))(torch.randn(2, 3), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="reduction must be 'none', 'mean' or 'sum'"):
        compiler.jit(lambda a: F.soft_margin_loss(a, a, reduction="max"))(torch.randn(2, 3))
