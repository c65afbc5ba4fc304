"""Pointwise losses: mse, l1, smooth_l1, huber, binary_cross_entropy(_with_logits), kl_div.

Input and target are promoted and broadcast as torch does; the per-element loss is computed and
reduced in the compute dtype (float32 for bf16/f16) and rounded once. nll_loss and cross_entropy
live in `compiler/ops/nn.py` (their `_reduction` and `_reduce_loss` are shared here).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from compiler import prims
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy, same_size
from compiler.ops.nn import _reduce_loss, _reduction
from compiler.ops.operands import Promotion, broadcast_shapes, broadcast_to, result_dtypes, to_dtype
from compiler.ops.reductions import count
from compiler.ops.registry import register


def _operands(op: str, *tensors: Any) -> tuple[list[Any], Any]:
    """(the tensors broadcast together in their compute dtype (None stays None), the result dtype)."""
    present = [t for t in tensors if t is not None]
    for t in present:
        check(
            isinstance(t, TensorProxy),
            lambda t=t: f"{op}: expected tensors, got {type(t).__name__} {t!r}{called_at()}",
            TypeError,
        )
    compute, result = result_dtypes(present, Promotion.INT_TO_FLOAT)
    shape = broadcast_shapes(*(t.shape for t in present))
    return [None if t is None else to_dtype(broadcast_to(t, shape), compute) for t in tensors], result


def _same_shape(a: TensorProxy, b: TensorProxy) -> bool:
    """Whether two tensors have the same shape."""
    return a.ndim == b.ndim and all(map(same_size, a.shape, b.shape))


def _check_same_shape(op: str, input: TensorProxy, target: TensorProxy) -> None:
    """torch warns when the target's shape differs from the input's (it then broadcasts)."""
    if not _same_shape(input, target):
        warnings.warn(
            f"Using a target size ({tuple(target.shape)}) that is different to the input size "
            f"({tuple(input.shape)}). This will likely lead to incorrect results due to broadcasting. "
            "Please ensure they have the same size.",
            stacklevel=4,
        )


def _mean_or_sum(loss: TensorProxy, reduction: str, result: Any) -> TensorProxy:
    """`loss` reduced as `reduction` says ("mean" over every element), in the result dtype."""
    return to_dtype(_reduce_loss(loss, reduction, count(loss.shape, range(loss.ndim))), result)


def _pointwise(
    op: str,
    input: Any,
    target: Any,
    size_average: Any,
    reduce: Any,
    reduction: str,
    body: Callable,
    weight: Any = None,
    mean_by_weight: bool = True,
) -> TensorProxy:
    """A loss `body(x, t)` per element, times `weight`, reduced; a weighted "mean" divides by the sum
    of the weights (mse, l1) or, without `mean_by_weight`, by the element count (huber)."""
    reduction = _reduction(op, size_average, reduce, reduction)
    (x, t), result = _operands(op, input, target)
    _check_same_shape(op, input, target)
    if weight is None:
        return _mean_or_sum(body(x, t), reduction, result)
    check(
        isinstance(weight, TensorProxy) and _same_shape(weight, input),
        lambda: f"{op}: weight must have the input's shape {tuple(input.shape)}{called_at()}",
        ValueError,
    )
    w = to_dtype(weight, x.dtype)
    loss = prims.mul(body(x, t), w)
    total = prims.sum(w, tuple(range(w.ndim))) if mean_by_weight else count(loss.shape, range(loss.ndim))
    return to_dtype(_reduce_loss(loss, reduction, total), result)


@register("torch.nn.functional.mse_loss")
def mse_loss(
    input: TensorProxy,
    target: TensorProxy,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    weight: Any = None,
) -> Any:
    """(input - target) ** 2, reduced."""

    def body(x: TensorProxy, t: TensorProxy) -> TensorProxy:
        diff = prims.sub(x, t)
        return prims.mul(diff, diff)

    return _pointwise("mse_loss", input, target, size_average, reduce, reduction, body, weight)


@register("torch.nn.functional.l1_loss")
def l1_loss(
    input: TensorProxy,
    target: TensorProxy,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    weight: Any = None,
) -> Any:
    """|input - target|, reduced."""
    body = lambda x, t: prims.abs(prims.sub(x, t))
    return _pointwise("l1_loss", input, target, size_average, reduce, reduction, body, weight)


def _quadratic_then_linear(x: TensorProxy, t: TensorProxy, threshold: float, scale: float) -> TensorProxy:
    """0.5 z^2 * scale / threshold where z = |x - t| < threshold, else scale * (z - 0.5 threshold)."""
    z = prims.abs(prims.sub(x, t))
    quadratic = prims.mul(prims.mul(z, z), 0.5 * scale / threshold)
    return prims.where(prims.lt(z, threshold), quadratic, prims.mul(prims.sub(z, 0.5 * threshold), scale))


@register("torch.nn.functional.smooth_l1_loss")
def smooth_l1_loss(
    input: TensorProxy,
    target: TensorProxy,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    beta: float = 1.0,
) -> Any:
    """0.5 z^2 / beta below beta, z - 0.5 beta above (z = |input - target|); beta 0 is l1_loss."""
    check(beta >= 0, lambda: f"smooth_l1_loss: beta must be non-negative, got {beta}{called_at()}", ValueError)
    if beta == 0:
        return l1_loss(input, target, size_average, reduce, reduction)
    body = lambda x, t: _quadratic_then_linear(x, t, beta, 1.0)
    return _pointwise("smooth_l1_loss", input, target, size_average, reduce, reduction, body)


@register("torch.nn.functional.huber_loss")
def huber_loss(
    input: TensorProxy, target: TensorProxy, reduction: str = "mean", delta: float = 1.0, weight: Any = None
) -> Any:
    """0.5 z^2 below delta, delta * (z - 0.5 delta) above (z = |input - target|), times weight."""
    check(delta > 0, lambda: f"huber_loss: delta must be positive, got {delta}{called_at()}", ValueError)
    body = lambda x, t: _quadratic_then_linear(x, t, delta, delta)
    return _pointwise("huber_loss", input, target, None, None, reduction, body, weight, mean_by_weight=False)


@register("torch.nn.functional.binary_cross_entropy_with_logits")
def binary_cross_entropy_with_logits(
    input: TensorProxy,
    target: TensorProxy,
    weight: TensorProxy | None = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    pos_weight: TensorProxy | None = None,
) -> Any:
    """(1 - t) x + (1 + (pw - 1) t) (log1p(exp(-|x|)) + max(-x, 0)): torch's overflow-free formula."""
    reduction = _reduction("binary_cross_entropy_with_logits", size_average, reduce, reduction)
    check(
        isinstance(target, TensorProxy) and isinstance(input, TensorProxy) and _same_shape(input, target),
        lambda: (
            f"binary_cross_entropy_with_logits: target size ({tuple(getattr(target, 'shape', ()))}) must be the "
            f"same as input size ({tuple(getattr(input, 'shape', ()))}){called_at()}"
        ),
        ValueError,
    )
    (x, t, w, pw), result = _operands("binary_cross_entropy_with_logits", input, target, weight, pos_weight)
    softplus_neg = prims.add(prims.log1p(prims.exp(prims.neg(prims.abs(x)))), prims.maximum(prims.neg(x), 0.0))
    log_weight = prims.add(prims.mul(prims.sub(pw, 1.0), t), 1.0) if pw is not None else None
    loss = prims.add(
        prims.mul(prims.sub(1.0, t), x), softplus_neg if log_weight is None else prims.mul(log_weight, softplus_neg)
    )
    if w is not None:
        loss = prims.mul(loss, w)
    return _mean_or_sum(loss, reduction, result)


@register("torch.nn.functional.binary_cross_entropy")
def binary_cross_entropy(
    input: TensorProxy,
    target: TensorProxy,
    weight: TensorProxy | None = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Any:
    """-(t log(x) + (1 - t) log(1 - x)) with each log clamped to >= -100 (as torch), times weight."""
    reduction = _reduction("binary_cross_entropy", size_average, reduce, reduction)
    check(
        isinstance(target, TensorProxy) and isinstance(input, TensorProxy) and _same_shape(input, target),
        lambda: f"binary_cross_entropy: target and input must have the same shape{called_at()}",
        ValueError,
    )
    (x, t, w), result = _operands("binary_cross_entropy", input, target, weight)
    log_x = prims.maximum(prims.log(x), -100.0)
    log_rest = prims.maximum(prims.log1p(prims.neg(x)), -100.0)
    loss = prims.neg(prims.add(prims.mul(t, log_x), prims.mul(prims.sub(1.0, t), log_rest)))
    if w is not None:
        loss = prims.mul(loss, w)
    return _mean_or_sum(loss, reduction, result)


@register("torch.nn.functional.kl_div")
def kl_div(
    input: TensorProxy,
    target: TensorProxy,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    log_target: bool = False,
) -> Any:
    """t (log t - input) (0 where t is 0), or exp(t) (t - input) for log targets; "batchmean" divides
    the sum by the batch size (dim 0)."""
    batchmean = reduction == "batchmean" and size_average is None and reduce is None
    if reduction == "mean":
        warnings.warn(
            "reduction: 'mean' divides the total loss by both the batch size and the support size."
            "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
            "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
            stacklevel=3,
        )
    reduction = _reduction("kl_div", size_average, reduce, "sum" if batchmean else reduction)
    (x, t), result = _operands("kl_div", input, target)
    if log_target:
        loss = prims.mul(prims.exp(t), prims.sub(t, x))
    else:
        zero = prims.eq(t, 0.0)
        t_log_t = prims.where(zero, 0.0, prims.mul(t, prims.log(prims.where(zero, 1.0, t))))
        loss = prims.sub(t_log_t, prims.mul(t, x))
    out = _reduce_loss(loss, reduction, count(loss.shape, range(loss.ndim)))
    if batchmean and input.ndim != 0:
        out = prims.div(out, input.shape[0])
    return to_dtype(out, result)
