"""Neural-network ops: softmax/log_softmax, layer_norm/rms_norm, nll_loss/cross_entropy, attention.

Low-precision inputs (bf16/f16) are normalised and reduced in float32 and rounded once at the
end. softmax and log_softmax subtract the row maximum first, so large logits do not overflow; the
maximum is behind a stop-gradient (`stable_shift`), so the backward never differentiates it.
cross_entropy with class indices never builds the log-probabilities (see `cross_entropy`).
Linear algebra (matmul, bmm, linear) lives in `compiler/ops/linalg.py`.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import torch

from compiler import prims
from compiler.core import dtypes
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy, same_size
from compiler.ops.attention_dropout import attention_with_dropout
from compiler.ops.causal_masks import is_causal_mask
from compiler.ops.grouped_query import fold_groups, kv_groups, repeat_kv_heads, rows_attend_alone, unfold_groups
from compiler.ops.masks import additive_mask
from compiler.ops.operands import broadcast_shapes, broadcast_to, to_dtype
from compiler.ops.reductions import count, expand_reduced, reduce_dims, stable_shift
from compiler.ops.registry import register

# ---------------------------------------------------------------------------------------------
# softmax, log_softmax


def _check_floating(op: str, input: Any) -> None:
    check(
        isinstance(input, TensorProxy) and dtypes.is_float(input.dtype),
        lambda: (
            f"{op}: expected a floating point tensor, got {getattr(input, 'dtype', type(input).__name__)} "
            f"(pass dtype= to convert it first){called_at()}"
        ),
        TypeError,
    )


def _shifted(x: TensorProxy, dims: tuple[int, ...]) -> TensorProxy:
    """x - max(x) over `dims`; x itself when the dims are empty (amax rejects them, nothing overflows)."""
    if count(x.shape, dims) == 0:
        return x
    return prims.sub(x, expand_reduced(stable_shift(x, dims), x.shape, dims))


def _log_softmax_compute(x: TensorProxy, dims: tuple[int, ...]) -> TensorProxy:
    """log_softmax of `x` (already in its compute dtype) over `dims`: (x - max) - log(sum(exp(x - max)))."""
    shifted = _shifted(x, dims)
    log_total = prims.log(prims.sum(prims.exp(shifted), dims))
    return prims.sub(shifted, expand_reduced(log_total, x.shape, dims))


def _softmax(op: str, input: TensorProxy, dim: Any, dtype: Any, log: bool) -> TensorProxy:
    if dtype is not None:
        check(
            isinstance(input, TensorProxy),
            lambda: f"{op}: expected a tensor, got {type(input).__name__}{called_at()}",
            TypeError,
        )
        input = to_dtype(input, dtype)
    _check_floating(op, input)
    check(
        not isinstance(dim, (tuple, list)),
        lambda: f"{op}: dim must be a single int, got {dim!r}{called_at()}",
        TypeError,
    )
    dims = reduce_dims(op, input, dim)
    x = to_dtype(input, dtypes.compute_dtype(input.dtype))
    if log:
        out = _log_softmax_compute(x, dims)
    else:
        # NOTE: times the reciprocal of the sum, not divided by it: one division per row instead of one
        # per element, which kept nvFuser's softmax well under memory bandwidth (the same to an ulp)
        exps = prims.exp(_shifted(x, dims))
        out = prims.mul(exps, expand_reduced(prims.reciprocal(prims.sum(exps, dims)), x.shape, dims))
    return to_dtype(out, input.dtype)


def _implicit_dim(op: str, input: TensorProxy, dim: Any) -> Any:
    """torch.nn.functional's legacy choice when dim is None (with torch's deprecation warning)."""
    if dim is not None:
        return dim
    warnings.warn(
        f"Implicit dimension choice for {op} has been deprecated. Change the call to include dim=X as an argument.",
        stacklevel=4,
    )
    return 0 if input.ndim in (0, 1, 3) else 1


@register("torch.softmax", "torch.Tensor.softmax")
def softmax(input: TensorProxy, dim: int, dtype: Any = None) -> Any:
    """torch.softmax / Tensor.softmax along `dim`, after converting to `dtype` when given."""
    return _softmax("softmax", input, dim, dtype, log=False)


@register("torch.log_softmax", "torch.Tensor.log_softmax")
def log_softmax(input: TensorProxy, dim: int, dtype: Any = None) -> Any:
    """torch.log_softmax / Tensor.log_softmax along `dim`, after converting to `dtype` when given."""
    return _softmax("log_softmax", input, dim, dtype, log=True)


@register("torch.nn.functional.softmax")
def functional_softmax(input: TensorProxy, dim: Any = None, _stacklevel: int = 3, dtype: Any = None) -> Any:
    """torch.nn.functional.softmax (dim=None picks torch's legacy implicit dim, with its warning)."""
    return _softmax("softmax", input, _implicit_dim("softmax", input, dim), dtype, log=False)


@register("torch.nn.functional.log_softmax")
def functional_log_softmax(input: TensorProxy, dim: Any = None, _stacklevel: int = 3, dtype: Any = None) -> Any:
    """torch.nn.functional.log_softmax (dim=None picks torch's legacy implicit dim)."""
    return _softmax("log_softmax", input, _implicit_dim("log_softmax", input, dim), dtype, log=True)


# ---------------------------------------------------------------------------------------------
# layer_norm, rms_norm


def _normalized_dims(op: str, input: TensorProxy, normalized_shape: Any, params: dict[str, Any]) -> tuple[int, ...]:
    """The trailing dims `normalized_shape` names, after checking the input and parameters match it."""
    _check_floating(op, input)
    shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    k = len(shape)
    check(
        0 < k <= input.ndim and all(map(same_size, input.shape[input.ndim - k :], shape)),
        lambda: (
            f"{op}: normalized_shape {tuple(shape)} must match the last {k} dims of the input, whose shape "
            f"is {tuple(input.shape)}{called_at()}"
        ),
        ValueError,
    )
    for name, param in params.items():
        check(
            param is None
            or (isinstance(param, TensorProxy) and param.ndim == k and all(map(same_size, param.shape, shape))),
            lambda name=name, param=param: (
                f"{op}: {name} must have shape {tuple(shape)} (normalized_shape), got "
                f"{getattr(param, 'shape', param)}{called_at()}"
            ),
            ValueError,
        )
    return tuple(range(input.ndim - k, input.ndim))


def _affine(out: TensorProxy, param: TensorProxy | None, combine: Any) -> TensorProxy:
    """`combine(out, param)` with `param` (trailing dims) broadcast to `out`, in `out`'s dtype."""
    if param is None:
        return out
    param = to_dtype(param, out.dtype)
    offset = out.ndim - param.ndim
    return combine(out, prims.broadcast_in_dim(param, list(out.shape), list(range(offset, out.ndim))))


@register("torch.nn.functional.layer_norm", "torch.layer_norm")
def layer_norm(
    input: TensorProxy,
    normalized_shape: Sequence[int],
    weight: TensorProxy | None = None,
    bias: TensorProxy | None = None,
    eps: float = 1e-5,
    cudnn_enable: bool = True,
) -> Any:
    """Normalises over the trailing `normalized_shape` dims (biased variance), then weight and bias."""
    dims = _normalized_dims("layer_norm", input, normalized_shape, {"weight": weight, "bias": bias})
    x = to_dtype(input, dtypes.compute_dtype(input.dtype))
    n = count(x.shape, dims)
    mean = expand_reduced(prims.div(prims.sum(x, dims), n), x.shape, dims)
    centered = prims.sub(x, mean)
    variance = prims.div(prims.sum(prims.mul(centered, centered), dims), n)
    rstd = prims.rsqrt(prims.add(variance, eps))
    out = prims.mul(centered, expand_reduced(rstd, x.shape, dims))
    out = _affine(_affine(out, weight, prims.mul), bias, prims.add)
    return to_dtype(out, input.dtype)


@register("torch.nn.functional.rms_norm", "torch.rms_norm")
def rms_norm(
    input: TensorProxy,
    normalized_shape: Sequence[int],
    weight: TensorProxy | None = None,
    eps: float | None = None,
) -> Any:
    """x / sqrt(mean(x^2) + eps) over the trailing dims, times weight; eps defaults to the compute dtype's."""
    dims = _normalized_dims("rms_norm", input, normalized_shape, {"weight": weight})
    compute = dtypes.compute_dtype(input.dtype)
    if eps is None:
        # NOTE: torch's default is the epsilon of the compute dtype (float32 for bf16/f16).
        eps = torch.finfo(compute).eps
    x = to_dtype(input, compute)
    mean_square = prims.div(prims.sum(prims.mul(x, x), dims), count(x.shape, dims))
    rms_inverse = prims.rsqrt(prims.add(mean_square, eps))
    out = _affine(prims.mul(x, expand_reduced(rms_inverse, x.shape, dims)), weight, prims.mul)
    return to_dtype(out, input.dtype)


# ---------------------------------------------------------------------------------------------
# nll_loss, cross_entropy (class indices or class probabilities)


def _reduction(op: str, size_average: Any, reduce: Any, reduction: str) -> str:
    if size_average is not None or reduce is not None:
        reduction = torch.nn._reduction.legacy_get_string(size_average, reduce)
    check(
        reduction in ("none", "mean", "sum"),
        lambda: f"{op}: reduction must be 'none', 'mean' or 'sum', got {reduction!r}{called_at()}",
        ValueError,
    )
    return reduction


def _class_dim(op: str, input: TensorProxy, target: TensorProxy, class_indices: bool) -> int:
    """1 for (N, C, d1, ...) inputs, 0 for (C,); checks the target's shape against the input."""
    _check_floating(op, input)
    check(
        input.ndim >= 1 and isinstance(target, TensorProxy),
        lambda: f"{op}: expected an input of shape (C,) or (N, C, ...) and a target tensor{called_at()}",
        ValueError,
    )
    cdim = 1 if input.ndim >= 2 else 0
    expected = [s for i, s in enumerate(input.shape) if i != cdim] if class_indices else list(input.shape)
    check(
        target.ndim == len(expected) and all(map(same_size, target.shape, expected)),
        lambda: (
            f"{op}: target of shape {tuple(target.shape)} does not fit input of shape {tuple(input.shape)} "
            f"(expected {tuple(expected)}){called_at()}"
        ),
        ValueError,
    )
    return cdim


def _picked(values: TensorProxy, safe_target: TensorProxy, cdim: int) -> TensorProxy:
    """values[..., target, ...] along the class dim (torch.gather semantics through take_along_dim)."""
    # NOTE: the index takes the values' own sizes off the class dim: with symbolic sizes the
    # target's are other symbols (checked equal by `_class_dim`), and the nvFuser translator takes
    # the gather in-fusion (`take_along_axis`) only where it sees those sizes are the values'.
    shape = [1 if d == cdim else size for d, size in enumerate(values.shape)]
    index = prims.broadcast_in_dim(safe_target, shape, [i for i in range(len(shape)) if i != cdim])
    return prims.squeeze(prims.take_along_dim(values, index, cdim), [cdim])


def _targets(target: TensorProxy, ignore_index: int) -> tuple[TensorProxy, TensorProxy]:
    """(keep mask, target with the ignored entries replaced by class 0, a valid index)."""
    target = to_dtype(target, torch.int64)
    keep = prims.ne(target, ignore_index)
    return keep, prims.where(keep, target, 0)


def _nll(
    logp_at_target: TensorProxy, keep: TensorProxy, safe_target: TensorProxy, weight: Any
) -> tuple[TensorProxy, TensorProxy]:
    """(per-element loss, per-element weight) from each target's log-probability; ignored targets
    get loss 0 and weight 0."""
    dtype = logp_at_target.dtype
    if weight is None:
        weights = to_dtype(keep, dtype)
    else:
        flat = prims.reshape(safe_target, [count(safe_target.shape, range(safe_target.ndim))])
        picked_weights = prims.reshape(prims.index_select(to_dtype(weight, dtype), 0, flat), list(safe_target.shape))
        weights = prims.where(keep, picked_weights, 0.0)
    return prims.where(keep, prims.neg(prims.mul(logp_at_target, weights)), 0.0), weights


def _reduce_loss(loss: TensorProxy, reduction: str, total_weight: Any) -> TensorProxy:
    all_dims = tuple(range(loss.ndim))
    if reduction == "none":
        return loss
    if reduction == "sum":
        return prims.sum(loss, all_dims)
    return prims.div(prims.sum(loss, all_dims), total_weight)


def _check_weight(op: str, weight: Any, classes: Any) -> None:
    check(
        weight is None
        or (isinstance(weight, TensorProxy) and weight.ndim == 1 and same_size(weight.shape[0], classes)),
        lambda: f"{op}: weight must be a 1-D tensor with one entry per class ({classes}), got {weight!r}{called_at()}",
        ValueError,
    )


@register("torch.nn.functional.nll_loss")
def nll_loss(
    input: TensorProxy,
    target: TensorProxy,
    weight: TensorProxy | None = None,
    size_average: Any = None,
    ignore_index: int = -100,
    reduce: Any = None,
    reduction: str = "mean",
) -> Any:
    """The negative log likelihood of class-index targets given log-probabilities (dim 1, or 0 for 1-D)."""
    reduction = _reduction("nll_loss", size_average, reduce, reduction)
    cdim = _class_dim("nll_loss", input, target, class_indices=True)
    _check_weight("nll_loss", weight, input.shape[cdim])
    logp = to_dtype(input, dtypes.compute_dtype(input.dtype))
    keep, safe_target = _targets(target, ignore_index)
    loss, weights = _nll(_picked(logp, safe_target, cdim), keep, safe_target, weight)
    total = prims.sum(weights, tuple(range(weights.ndim))) if reduction == "mean" else None
    return to_dtype(_reduce_loss(loss, reduction, total), input.dtype)


@register("torch.nn.functional.cross_entropy")
def cross_entropy(
    input: TensorProxy,
    target: TensorProxy,
    weight: TensorProxy | None = None,
    size_average: Any = None,
    ignore_index: int = -100,
    reduce: Any = None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Any:
    """log_softmax over the class dim, then nll (class indices) or -sum(target * logp) (probabilities).

    With class indices and no label smoothing, the log-probability of each target is computed
    without the [N, C] log_softmax: (x[target] - max) - log(sum(exp(x - max))), its logit gathered
    from the input. The forward reads the logits once for the row statistics (max, sum of
    exps) and gathers N values; the backward is softmax(x) - onehot(target), scaled."""
    reduction = _reduction("cross_entropy", size_average, reduce, reduction)
    check(
        0.0 <= label_smoothing <= 1.0,
        lambda: f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}{called_at()}",
        ValueError,
    )
    class_indices = isinstance(target, TensorProxy) and not dtypes.is_float(target.dtype)
    cdim = _class_dim("cross_entropy", input, target, class_indices)
    _check_weight("cross_entropy", weight, input.shape[cdim])
    x = to_dtype(input, dtypes.compute_dtype(input.dtype))
    if class_indices and label_smoothing == 0.0:
        keep, safe_target = _targets(target, ignore_index)
        loss, weights = _nll(_target_log_probability(input, x, safe_target, cdim), keep, safe_target, weight)
        total = prims.sum(weights, tuple(range(weights.ndim))) if reduction == "mean" else None
        return to_dtype(_reduce_loss(loss, reduction, total), input.dtype)
    logp = _log_softmax_compute(x, (cdim,))
    weight_b = None
    if weight is not None:
        weight_b = prims.broadcast_in_dim(to_dtype(weight, logp.dtype), list(logp.shape), [cdim])
    if not class_indices:
        return to_dtype(_probability_loss(logp, target, weight_b, cdim, reduction, label_smoothing), input.dtype)
    keep, safe_target = _targets(target, ignore_index)
    loss, weights = _nll(_picked(logp, safe_target, cdim), keep, safe_target, weight)
    total = prims.sum(weights, tuple(range(weights.ndim))) if reduction == "mean" else None
    # NOTE: torch's formula: (1 - e) * nll + e / C * (-sum over classes of weight * logp).
    spread = logp if weight_b is None else prims.mul(logp, weight_b)
    smooth = _reduce_loss(prims.where(keep, prims.neg(prims.sum(spread, (cdim,))), 0.0), reduction, total)
    out = _reduce_loss(loss, reduction, total)
    out = prims.add(prims.mul(out, 1.0 - label_smoothing), prims.mul(smooth, label_smoothing / input.shape[cdim]))
    return to_dtype(out, input.dtype)


def _target_log_probability(input: TensorProxy, x: TensorProxy, safe_target: TensorProxy, cdim: int) -> TensorProxy:
    """log_softmax(x)[target] along the class dim, per element of the target, without the full
    log_softmax: `x` is `input` in its compute dtype; the target's logit is gathered from `input`
    (a fusion reads its own inputs' elements anywhere) and converted after the gather."""
    dims = (cdim,)
    top = stable_shift(x, dims)
    log_total = prims.log(prims.sum(prims.exp(prims.sub(x, expand_reduced(top, x.shape, dims))), dims))
    at_target = to_dtype(_picked(input, safe_target, cdim), x.dtype)
    return prims.sub(prims.sub(at_target, top), log_total)


def _probability_loss(
    logp: TensorProxy, target: TensorProxy, weight_b: Any, cdim: int, reduction: str, label_smoothing: float
) -> TensorProxy:
    """cross_entropy with class probabilities: -sum(weight * target * logp) over classes."""
    classes = logp.shape[cdim]
    target = to_dtype(target, logp.dtype)
    if label_smoothing > 0.0:
        target = prims.add(prims.mul(target, 1.0 - label_smoothing), label_smoothing / classes)
    terms = prims.mul(logp, target)
    if weight_b is not None:
        terms = prims.mul(terms, weight_b)
    loss = prims.neg(prims.sum(terms, (cdim,)))
    return _reduce_loss(loss, reduction, count(logp.shape, [i for i in range(logp.ndim) if i != cdim]))


# ---------------------------------------------------------------------------------------------
# attention


@register("torch.nn.functional.scaled_dot_product_attention")
def scaled_dot_product_attention(
    query: TensorProxy,
    key: TensorProxy,
    value: TensorProxy,
    attn_mask: TensorProxy | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Any:
    """softmax(q k^T * scale + mask) v as one prim (executors pick a kernel)."""
    check(
        isinstance(dropout_p, (int, float)) and 0.0 <= dropout_p <= 1.0,
        lambda: f"scaled_dot_product_attention: dropout_p={dropout_p!r}: expected a number in [0, 1]{called_at()}",
        ValueError,
    )
    check(
        query.dtype == key.dtype == value.dtype and dtypes.is_float(query.dtype),
        lambda: (
            f"scaled_dot_product_attention: query, key and value must share a floating dtype, got "
            f"{query.dtype}, {key.dtype}, {value.dtype}{called_at()}"
        ),
        TypeError,
    )
    check(
        attn_mask is None or not is_causal,
        lambda: f"scaled_dot_product_attention: attn_mask and is_causal=True cannot be combined{called_at()}",
        ValueError,
    )
    if isinstance(attn_mask, TensorProxy) and attn_mask.dtype == torch.bool and is_causal_mask(attn_mask, query, key):
        attn_mask, is_causal = None, True  # built as `key position <= query position`: FlashAttention takes it
    if attn_mask is not None:
        check(
            isinstance(attn_mask, TensorProxy) and (attn_mask.dtype == torch.bool or attn_mask.dtype == query.dtype),
            lambda: f"scaled_dot_product_attention: attn_mask must be bool or {query.dtype}{called_at()}",
            TypeError,
        )
        # NOTE: torch turns a bool mask into an additive one inside each attention call (two kernels
        # and their host time, per layer); here it happens once per mask, in a fusion, shared by
        # every attention that reads it.
        attn_mask = additive_mask(attn_mask, query.dtype)
    if enable_gqa and key.ndim >= 3 and not same_size(key.shape[-3], query.shape[-3]):
        groups = kv_groups(query, key)
        heads = query.shape[-3]
        if rows_attend_alone(attn_mask, is_causal, dropout_p):
            folded = fold_groups(query, key.shape[-3], groups)
            out = prims.sdpa(*_broadcast_batch(folded, key, value), attn_mask, False, scale)
            return unfold_groups(out, heads, query.shape[-2])
        if dropout_p == 0.0:
            grouped = _broadcast_batch(query, key, value, keep_heads=True)
            return prims.sdpa(*grouped, attn_mask, bool(is_causal), scale)
        key, value = repeat_kv_heads(key, heads, groups), repeat_kv_heads(value, heads, groups)
    if dropout_p > 0.0:
        return attention_with_dropout(*_broadcast_batch(query, key, value), attn_mask, dropout_p, is_causal, scale)
    return prims.sdpa(*_broadcast_batch(query, key, value), attn_mask, bool(is_causal), scale)


def _broadcast_batch(
    query: TensorProxy, key: TensorProxy, value: TensorProxy, *, keep_heads: bool = False
) -> tuple[TensorProxy, ...]:
    """q, k, v with their batch dims (all but the last two) broadcast to one shape, as torch does;
    with `keep_heads`, all but the last three: each keeps its own heads (grouped-query attention)."""
    kept = 3 if keep_heads else 2
    batch = broadcast_shapes(query.shape[:-kept], key.shape[:-kept], value.shape[:-kept])
    return tuple(broadcast_to(t, [*batch, *t.shape[-kept:]]) for t in (query, key, value))
