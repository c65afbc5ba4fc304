"""Margin and embedding losses: margin_ranking, hinge_embedding, soft_margin, cosine_embedding,
triplet_margin, multi_margin, multilabel_margin, multilabel_soft_margin.

NOTE: triplet_margin_with_distance_loss is not registered: its `distance_function` argument would be
an argument of the op's line in the printed trace, which cannot name a Python callable.

Each is written as calls of torch ops on the proxies, in the steps eager's kernel takes, so values,
result dtypes and gradients (a clamp at zero passes the gradient where its input is >= 0; the
per-class hinges of multi_margin pass it only where positive, as eager's loops) are eager's.
`reduction` is "none", "mean" or "sum"; the legacy `size_average` / `reduce` flags map onto it.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from compiler import prims
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy
from compiler.ops.nn import _reduction
from compiler.ops.registry import register
from compiler.ops.special import tensors_only

_COSINE_EPSILON = 1e-12  # eager's cosine_embedding_loss adds it to both squared magnitudes


def reduced(loss: TensorProxy, reduction: str) -> TensorProxy:
    """`loss` as it is, or its mean or sum over every element."""
    return loss if reduction == "none" else loss.mean() if reduction == "mean" else loss.sum()


@register("torch.nn.functional.margin_ranking_loss")
def margin_ranking_loss(
    input1: TensorProxy,
    input2: TensorProxy,
    target: TensorProxy,
    margin: float = 0.0,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> TensorProxy:
    """max(0, -target * (input1 - input2) + margin), reduced."""
    reduction = _reduction("margin_ranking_loss", size_average, reduce, reduction)
    tensors_only("margin_ranking_loss", input1, input2, target)
    check(
        input1.ndim == input2.ndim == target.ndim,
        lambda: (
            f"margin_ranking_loss : All input tensors should have same dimension but got sizes: input1: "
            f"{tuple(input1.shape)}, input2: {tuple(input2.shape)}, target: {tuple(target.shape)} {called_at()}"
        ),
        RuntimeError,
    )
    return reduced((-target * (input1 - input2) + margin).clamp_min(0), reduction)


@register("torch.nn.functional.hinge_embedding_loss")
def hinge_embedding_loss(
    input: TensorProxy,
    target: TensorProxy,
    margin: float = 1.0,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> TensorProxy:
    """input where target is 1, max(0, margin - input) where it is -1 (both terms for other values)."""
    reduction = _reduction("hinge_embedding_loss", size_average, reduce, reduction)
    tensors_only("hinge_embedding_loss", input, target)
    zeros = torch.zeros_like(input)
    margin_term = torch.where(target != 1, (margin - input).clamp_min(0), zeros)
    return reduced(margin_term + torch.where(target != -1, input, zeros), reduction)


@register("torch.nn.functional.soft_margin_loss")
def soft_margin_loss(
    input: TensorProxy, target: TensorProxy, size_average: Any = None, reduce: Any = None, reduction: str = "mean"
) -> TensorProxy:
    """log(1 + exp(-target * input)), reduced (as eager: exp may overflow to inf)."""
    reduction = _reduction("soft_margin_loss", size_average, reduce, reduction)
    tensors_only("soft_margin_loss", input, target)
    return reduced(torch.log1p(torch.exp(-input * target)), reduction)


@register("torch.nn.functional.cosine_embedding_loss")
def cosine_embedding_loss(
    input1: TensorProxy,
    input2: TensorProxy,
    target: TensorProxy,
    margin: float = 0.0,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> TensorProxy:
    """1 - cos(input1, input2) where target is 1, max(0, cos - margin) where it is -1, per row."""
    reduction = _reduction("cosine_embedding_loss", size_average, reduce, reduction)
    tensors_only("cosine_embedding_loss", input1, input2, target)
    check(
        target.ndim <= 1 and input1.ndim == input2.ndim == target.ndim + 1,
        lambda: (
            f"cosine_embedding_loss: expected a 1-D target with 2-D inputs or a 0-D target with 1-D inputs, got "
            f"{tuple(target.shape)}, {tuple(input1.shape)} and {tuple(input2.shape)}{called_at()}"
        ),
        RuntimeError,
    )
    dim = target.ndim
    dot = (input1 * input2).sum(dim)
    squares = ((input1 * input1).sum(dim) + _COSINE_EPSILON) * ((input2 * input2).sum(dim) + _COSINE_EPSILON)
    cos = dot / squares.sqrt()
    zeros = torch.zeros_like(cos)
    similar = torch.where(target == 1, 1 - cos, zeros)
    return reduced(similar + torch.where(target == -1, (cos - margin).clamp_min(0), zeros), reduction)


@register("torch.nn.functional.triplet_margin_loss")
def triplet_margin_loss(
    anchor: TensorProxy,
    positive: TensorProxy,
    negative: TensorProxy,
    margin: float = 1.0,
    p: float = 2,
    eps: float = 1e-6,
    swap: bool = False,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> TensorProxy:
    """max(0, margin + d(anchor, positive) - d(anchor, negative)), d the p-norm pairwise distance;
    `swap`: d(anchor, negative) replaced by d(positive, negative) where that is smaller."""
    reduction = _reduction("triplet_margin_loss", size_average, reduce, reduction)
    tensors_only("triplet_margin_loss", anchor, positive, negative)
    check(
        anchor.ndim == positive.ndim == negative.ndim,
        lambda: (
            f"triplet_margin_loss: The anchor, positive, and negative tensors are expected to have the same number "
            f"of dimensions, but got: anchor {anchor.ndim}D, positive {positive.ndim}D, and negative "
            f"{negative.ndim}D inputs{called_at()}"
        ),
        RuntimeError,
    )
    to_positive, to_negative = (
        F.pairwise_distance(anchor, positive, p, eps),
        F.pairwise_distance(anchor, negative, p, eps),
    )
    if swap:
        to_negative = torch.minimum(to_negative, F.pairwise_distance(positive, negative, p, eps))
    return reduced((margin + to_positive - to_negative).clamp_min(0), reduction)


def _frames_and_classes(op: str, input: Any, target: Any) -> tuple[int, int]:
    """(rows, classes) of a (), (C,) or (N, C) input, checked non-empty, with an integer target."""
    tensors_only(op, input, target)
    check(
        input.ndim <= 2 and input.numel() > 0,
        lambda: (
            f"{op}: Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
            f"{tuple(input.shape)}{called_at()}"
        ),
        RuntimeError,
    )
    check(
        not target.dtype.is_floating_point,
        lambda: f"{op}: expected an integer target, got {target.dtype}{called_at()}",
        RuntimeError,
    )
    return (1, input.numel()) if input.ndim <= 1 else (input.shape[0], input.shape[1])


@register("torch.nn.functional.multi_margin_loss")
def multi_margin_loss(
    input: TensorProxy,
    target: TensorProxy,
    p: int = 1,
    margin: float = 1.0,
    weight: TensorProxy | None = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> TensorProxy:
    """Per row: the sum over the other classes i of max(0, margin - x[target] + x[i]) ** p (times
    weight[target]), divided by the class count."""
    reduction = _reduction("multi_margin_loss", size_average, reduce, reduction)
    check(p in (1, 2), lambda: f"multi_margin_loss: only p == 1 and p == 2 supported, got {p}{called_at()}", ValueError)
    frames, classes = _frames_and_classes("multi_margin_loss", input, target)
    check(
        target.ndim <= 1 and target.numel() == frames,
        lambda: (
            f"multi_margin_loss: inconsistent target size, expected {frames} but got {tuple(target.shape)}{called_at()}"
        ),
        RuntimeError,
    )
    rows = input.reshape(frames, classes)
    labels = target.reshape(frames, 1)
    hinge = margin - rows.gather(1, labels) + rows
    others = prims.iota(classes, 0, 1, torch.int64, input.device) != labels
    positive = others & (hinge > 0)
    term = torch.where(positive, hinge if p == 1 else hinge * hinge, torch.zeros_like(hinge))
    if weight is not None:
        term = term * weight[labels]
    loss = term.sum(1) / classes
    return reduced(loss if target.ndim else loss.reshape(()), reduction)


@register("torch.nn.functional.multilabel_margin_loss")
def multilabel_margin_loss(
    input: TensorProxy, target: TensorProxy, size_average: Any = None, reduce: Any = None, reduction: str = "mean"
) -> TensorProxy:
    """Per row: the target classes are `target`'s entries up to its first -1; the sum over each
    target class j and non-target class i of max(0, 1 - x[j] + x[i]), divided by the class count."""
    reduction = _reduction("multilabel_margin_loss", size_average, reduce, reduction)
    frames, classes = _frames_and_classes("multilabel_margin_loss", input, target)
    check(
        tuple(target.shape) == tuple(input.shape)
        or (input.ndim <= 1 and target.ndim <= 1 and target.numel() == classes),
        lambda: (
            f"multilabel_margin_loss: inconsistent target size: {tuple(target.shape)} for input of size: "
            f"{tuple(input.shape)}{called_at()}"
        ),
        RuntimeError,
    )
    rows, labels = input.reshape(frames, classes), target.reshape(frames, classes)
    listed = (labels >= 0).long().cumprod(1).bool()  # the entries before the first -1
    hits = (labels.unsqueeze(2) == prims.iota(classes, 0, 1, torch.int64, input.device)) & listed.unsqueeze(2)
    is_target = hits.any(1)
    hinge = 1 - rows.gather(1, labels.clamp_min(0)).unsqueeze(2) + rows.unsqueeze(1)
    counted = listed.unsqueeze(2) & ~is_target.unsqueeze(1) & (hinge > 0)
    loss = torch.where(counted, hinge, torch.zeros_like(hinge)).sum((1, 2)) / classes
    return reduced(loss if input.ndim == 2 else loss.reshape(()), reduction)


@register("torch.nn.functional.multilabel_soft_margin_loss")
def multilabel_soft_margin_loss(
    input: TensorProxy,
    target: TensorProxy,
    weight: TensorProxy | None = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> TensorProxy:
    """The mean over classes of -(t log sigmoid(x) + (1 - t) log sigmoid(-x)) (times weight), reduced."""
    reduction = _reduction("multilabel_soft_margin_loss", size_average, reduce, reduction)
    tensors_only("multilabel_soft_margin_loss", input, target)
    loss = -(target * F.logsigmoid(input) + (1 - target) * F.logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    class_dim = input.ndim - 1
    return reduced(loss.sum(class_dim) / input.shape[class_dim], reduction)
