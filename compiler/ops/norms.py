"""Vector norms: linalg.vector_norm, torch.norm / Tensor.norm, F.normalize, renorm, cosine_similarity; and
group_norm (F.group_norm, torch.group_norm, nn.GroupNorm), a normalisation like layer_norm's; and
torch._weight_norm (weight normalisation of a parameter, as nn.utils.parametrizations.weight_norm).

bf16/f16 inputs accumulate in float32 and round once to the input dtype (or `dtype=`). Where a norm
is zero, autodiff must give torch's gradient (0, not the 0 * inf = NaN of differentiating sqrt or
pow at 0): the root is taken of a safe value (`_safe_root`), and powers of zero elements too.
linalg.matrix_norm takes "fro" and the column / row sum norms (1, -1, inf, -inf); the norms of
singular values ("nuc", 2, -2) are refused. renorm rescales the slices whose norm is too large.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from compiler import prims
from compiler.core import dtypes
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy, same_size, size_product
from compiler.ops.operands import (
    Promotion,
    broadcast_shapes,
    broadcast_to,
    canonical_dim,
    elementwise,
    result_dtypes,
    to_dtype,
)
from compiler.ops.reductions import count, expand_reduced, keep_dims, reduce_dims
from compiler.ops.registry import register


def _safe_root(total: TensorProxy, root: Any) -> TensorProxy:
    """total ** (1 / root) (sqrt for 2), 0 where total is 0 with a zero (not NaN) gradient there."""
    zero = prims.eq(total, 0.0)
    safe = prims.where(zero, 1.0, total)
    rooted = prims.sqrt(safe) if root == 2 else prims.pow(safe, 1.0 / root)
    return prims.where(zero, 0.0, rooted)


def _abs_pow(x: TensorProxy, p: float) -> TensorProxy:
    """|x| ** p; for p > 0 zero elements give 0 with gradient 0 (torch's rule for p < 1)."""
    if p == 2:
        return prims.mul(x, x)
    magnitude = prims.abs(x)
    if p == 1:
        return magnitude
    if p < 0:
        return prims.pow(magnitude, float(p))
    zero = prims.eq(magnitude, 0.0)
    return prims.where(zero, 0.0, prims.pow(prims.where(zero, 1.0, magnitude), float(p)))


def _vector_norm(x: TensorProxy, ord: Any, dims: tuple[int, ...]) -> TensorProxy:
    """The `ord`-norm of `x` (already in its compute dtype) over `dims`, reduced shape."""
    if ord == math.inf:
        return prims.amax(prims.abs(x), dims)
    if ord == -math.inf:
        return prims.amin(prims.abs(x), dims)
    if ord == 0:
        return prims.sum(prims.convert_element_type(prims.ne(x, 0.0), x.dtype), dims)
    total = prims.sum(_abs_pow(x, ord), dims)
    return total if ord == 1 else _safe_root(total, ord)


def vector_norm_of(op: str, input: Any, ord: Any, dim: Any, keepdim: bool, dtype: Any) -> TensorProxy:
    """The checked vector norm, in `dtype` (default: the input's), computed in float32 for bf16/f16."""
    check(
        isinstance(input, TensorProxy),
        lambda: f"{op}: expected a tensor, got {type(input).__name__}{called_at()}",
        TypeError,
    )
    check(
        isinstance(ord, (int, float)) and not isinstance(ord, bool),
        lambda: f"{op}: ord must be a number (matrix norms such as {ord!r} are not supported){called_at()}",
        NotImplementedError,
    )
    if dtype is not None:
        input = to_dtype(input, dtype)
    check(
        dtypes.is_float(input.dtype),
        lambda: f"{op}: expected a floating point input, got {input.dtype}{called_at()}",
        RuntimeError,
    )
    dims = reduce_dims(op, input, dim)
    out = to_dtype(_vector_norm(to_dtype(input, dtypes.compute_dtype(input.dtype)), ord, dims), input.dtype)
    return keep_dims(out, input.shape, dims) if keepdim else out


@register("torch.linalg.vector_norm")
def vector_norm(
    x: TensorProxy, ord: Any = 2, dim: Any = None, keepdim: bool = False, *, dtype: Any = None, out: Any = None
) -> Any:
    """torch.linalg.vector_norm for ord in {p > 0, 0, inf, -inf} (and negative p) over `dim`."""
    check(out is None, lambda: f"torch.linalg.vector_norm: out= is not supported{called_at()}", NotImplementedError)
    return vector_norm_of("linalg.vector_norm", x, ord, dim, keepdim, dtype)


@register("torch.norm", "torch.Tensor.norm")
def norm(
    input: TensorProxy, p: Any = "fro", dim: Any = None, keepdim: bool = False, out: Any = None, dtype: Any = None
) -> Any:
    """torch.norm: a vector norm over `dim` ("fro" is the 2-norm over at most two dims)."""
    check(out is None, lambda: f"torch.norm: out= is not supported{called_at()}", NotImplementedError)
    if isinstance(p, str):
        count = 0 if dim is None else 1 if isinstance(dim, int) else len(dim)
        check(
            p == "fro" and (dim is None or count <= 2),
            lambda: f"torch.norm: the matrix norm p={p!r} (dim={dim!r}) is not supported{called_at()}",
            NotImplementedError,
        )
        p = 2
    return vector_norm_of("norm", input, 2.0 if p is None else p, dim, keepdim, dtype)


@register("torch.linalg.norm")
def linalg_norm(
    input: TensorProxy, ord: Any = None, dim: Any = None, keepdim: bool = False, *, out: Any = None, dtype: Any = None
) -> Any:
    """torch.linalg.norm where it is a vector norm: over one dim, over the whole of a 1-D input, or
    the 2-norm of the flattened input (ord None); Frobenius over two dims. Other matrix norms raise."""
    check(out is None, lambda: f"torch.linalg.norm: out= is not supported{called_at()}", NotImplementedError)
    dims = (dim,) if isinstance(dim, int) else dim
    if dims is None and ord is None:
        return vector_norm_of("linalg.norm", input, 2, None, keepdim, dtype)
    vector = len(dims) == 1 if dims is not None else input.ndim == 1
    if vector:
        return vector_norm_of("linalg.norm", input, 2 if ord is None else ord, dim, keepdim, dtype)
    if ord in (1, -1, math.inf, -math.inf) and not isinstance(ord, bool):
        return _matrix_norm(input, ord, (-2, -1) if dims is None else dims, keepdim, dtype)
    check(
        ord in (None, "fro"),
        lambda: (
            f"torch.linalg.norm: the matrix norm ord={ord!r} is not supported (vector norms, 'fro', 1, -1, inf "
            f"and -inf are: the others need singular values){called_at()}"
        ),
        NotImplementedError,
    )
    return vector_norm_of("linalg.norm", input, 2, dims, keepdim, dtype)


def _matrix_norm(input: TensorProxy, ord: float, dims: Any, keepdim: bool, dtype: Any) -> TensorProxy:
    """ord 1 / -1: the largest / smallest column sum of |input| over `dims` (rows, columns); inf /
    -inf: the largest / smallest row sum."""
    if dtype is not None:
        input = to_dtype(input, dtype)
    check(
        dtypes.is_float(input.dtype) and len(dims) == 2,
        lambda: (
            f"torch.linalg.norm: expected a floating point input and two dims, got {input.dtype}, {dims}{called_at()}"
        ),
        RuntimeError,
    )
    rows, columns = (canonical_dim(d, input.ndim) for d in dims)
    check(rows != columns, lambda: f"torch.linalg.norm: dims {dims} name one dim twice{called_at()}", RuntimeError)
    summed, extreme = (rows, columns) if abs(ord) == 1 else (columns, rows)
    sums = prims.sum(prims.abs(to_dtype(input, dtypes.compute_dtype(input.dtype))), (summed,))
    reduced = extreme - (extreme > summed)
    if ord > 0 and isinstance(input.shape[extreme], int) and input.shape[extreme] == 0:
        # NOTE: eager's largest sum over no rows or columns is 0 (its smallest raises, as amin does)
        shape = [s for i, s in enumerate(sums.shape) if i != reduced]
        out = to_dtype(prims.full(shape, 0.0, sums.dtype, input.device), input.dtype)
    else:
        pick = prims.amax if ord > 0 else prims.amin
        out = to_dtype(pick(sums, (reduced,)), input.dtype)
    return keep_dims(out, input.shape, sorted((rows, columns))) if keepdim else out


@register("torch.linalg.matrix_norm")
def matrix_norm(
    A: TensorProxy, ord: Any = "fro", dim: Any = (-2, -1), keepdim: bool = False, *, dtype: Any = None, out: Any = None
) -> Any:
    """torch.linalg.matrix_norm over the two dims `dim`: "fro", and 1 / -1 / inf / -inf (the largest
    or smallest column or row sum of |A|). "nuc", 2 and -2 need singular values: refused."""
    check(out is None, lambda: f"torch.linalg.matrix_norm: out= is not supported{called_at()}", NotImplementedError)
    check(
        isinstance(A, TensorProxy) and A.ndim >= 2,
        lambda: f"torch.linalg.matrix_norm: The input tensor A must have at least 2 dimensions.{called_at()}",
        RuntimeError,
    )
    check(
        isinstance(dim, (tuple, list)) and len(dim) == 2,
        lambda: f"torch.linalg.matrix_norm: dim must be a 2-tuple. Got {dim}{called_at()}",
        RuntimeError,
    )
    if ord == "fro":
        return vector_norm_of("linalg.matrix_norm", A, 2, tuple(dim), keepdim, dtype)
    check(
        ord in (1, -1, math.inf, -math.inf) and not isinstance(ord, (bool, str)),
        lambda: (
            f"torch.linalg.matrix_norm: ord={ord!r} is not supported ('fro', 1, -1, inf and -inf are; 'nuc', 2 "
            f"and -2 need singular values){called_at()}"
        ),
        NotImplementedError,
    )
    return _matrix_norm(A, ord, tuple(dim), keepdim, dtype)


@register("torch.renorm", "torch.Tensor.renorm")
def renorm(input: TensorProxy, p: float, dim: int, maxnorm: float, *, out: Any = None) -> Any:
    """Each slice of `input` along `dim` whose p-norm exceeds `maxnorm` scaled by maxnorm / (norm + 1e-7)
    (the norm and the scale in float32 for bf16/f16, as eager)."""
    check(out is None, lambda: f"torch.renorm: out= is not supported{called_at()}", NotImplementedError)
    check(p > 0, lambda: f"renorm: non-positive-norm not supported{called_at()}", RuntimeError)
    check(maxnorm >= 0, lambda: f"renorm: expected maxnorm to be >= 0 but got {maxnorm}{called_at()}", RuntimeError)
    check(
        input.ndim > 1,
        lambda: f"renorm: input needs at least 2 dimensions, got {input.ndim} dimensions{called_at()}",
        RuntimeError,
    )
    kept = canonical_dim(dim, input.ndim)
    dims = tuple(d for d in range(input.ndim) if d != kept)
    norm = vector_norm_of("renorm", input, p, dims, True, dtypes.compute_dtype(input.dtype))
    factor = torch.where(norm > maxnorm, maxnorm / (norm + 1e-7), 1.0)
    return (input * factor).to(input.dtype)


@register("torch.nn.functional.normalize")
def normalize(input: TensorProxy, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out: Any = None) -> Any:
    """input / max(norm_p(input, dim), eps), the norm broadcast along `dim`."""
    check(out is None, lambda: f"normalize: out= is not supported{called_at()}", NotImplementedError)
    norms = vector_norm_of("normalize", input, p, dim, False, dtypes.compute_dtype(input.dtype))
    dims = reduce_dims("normalize", input, dim)
    x = to_dtype(input, norms.dtype)
    out_ = prims.div(x, expand_reduced(prims.maximum(norms, eps), x.shape, dims))
    return to_dtype(out_, input.dtype)


@register("torch.nn.functional.cosine_similarity", "torch.cosine_similarity")
def cosine_similarity(x1: TensorProxy, x2: TensorProxy, dim: int = 1, eps: float = 1e-8) -> Any:
    """sum((x1 / max(|x1|, eps)) * (x2 / max(|x2|, eps))) over `dim`, after broadcasting (torch's formula).

    torch clamps the norms in place under no_grad, so the clamp passes gradients straight through:
    norm + stop_gradient(max(norm, eps) - norm) does the same."""
    for name, t in (("x1", x1), ("x2", x2)):
        check(
            isinstance(t, TensorProxy),
            lambda name=name, t=t: f"cosine_similarity: {name} must be a tensor, got {type(t).__name__}{called_at()}",
            TypeError,
        )
    compute, result = result_dtypes([x1, x2], Promotion.INT_TO_FLOAT)
    shape = broadcast_shapes(x1.shape, x2.shape)
    dims = (canonical_dim(dim, len(shape)),)
    units = []
    for t in (x1, x2):
        x = to_dtype(broadcast_to(t, shape), compute)
        n = _vector_norm(x, 2, dims)
        clamped = prims.add(n, prims.stop_gradient(prims.sub(prims.maximum(n, eps), n)))
        units.append(prims.div(x, expand_reduced(clamped, shape, dims)))
    return to_dtype(prims.sum(prims.mul(*units), dims), result)


@register("torch.nn.functional.pairwise_distance", "torch.pairwise_distance")
def pairwise_distance(
    x1: TensorProxy, x2: TensorProxy, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False
) -> Any:
    """The p-norm of x1 - x2 + eps over the last dim, after broadcasting (torch's formula: an integer
    difference is promoted to the default float dtype by the eps it adds)."""
    if dtypes.is_float(x1.dtype) or dtypes.is_float(x2.dtype):
        difference = elementwise(lambda a, b: prims.add(prims.sub(a, b), eps), x1, x2)
    else:
        difference = prims.add(to_dtype(elementwise(prims.sub, x1, x2), torch.get_default_dtype()), eps)
    return vector_norm_of("pairwise_distance", difference, p, -1, keepdim, None)


# ---------------------------------------------------------------------------------------------
# group_norm


def _check_group_norm(op: str, input: Any, num_groups: Any, weight: Any, bias: Any) -> None:
    check(
        isinstance(input, TensorProxy) and dtypes.is_float(input.dtype),
        lambda: f"{op}: expected a floating point input, got {getattr(input, 'dtype', input)!r}{called_at()}",
        TypeError,
    )
    check(
        input.ndim >= 2,
        lambda: f"{op}: expected an input of shape (N, C, *) with at least 2 dims, got {input.ndim}{called_at()}",
        ValueError,
    )
    check(
        isinstance(num_groups, int) and not isinstance(num_groups, bool) and num_groups > 0,
        lambda: f"{op}: num_groups must be a positive int, got {num_groups!r}{called_at()}",
        ValueError,
    )
    channels = input.shape[1]
    check(
        bool(channels % num_groups == 0),
        lambda: (
            f"{op}: the number of channels {channels} (input shape {tuple(input.shape)}) is not divisible by "
            f"num_groups={num_groups}{called_at()}"
        ),
        ValueError,
    )
    for name, param in (("weight", weight), ("bias", bias)):
        check(
            param is None
            or (isinstance(param, TensorProxy) and param.ndim == 1 and same_size(param.shape[0], channels)),
            lambda name=name, param=param: (
                f"{op}: {name} must be a 1-D tensor with one entry per channel ({channels}), got "
                f"{getattr(param, 'shape', param)}{called_at()}"
            ),
            ValueError,
        )


def _group_norm(input: TensorProxy, num_groups: int, weight: Any, bias: Any, eps: float) -> TensorProxy:
    """Normalises each group of C / num_groups channels (and every spatial element) of each sample to
    zero mean and unit biased variance, then scales and shifts each channel by weight and bias.
    bf16/f16 inputs are normalised in float32 and rounded once, as eager does."""
    x = to_dtype(input, dtypes.compute_dtype(input.dtype))
    shape = list(x.shape)
    grouped_shape = [shape[0], num_groups, shape[1] // num_groups, *shape[2:]]
    grouped = prims.reshape(x, grouped_shape)
    dims = tuple(range(2, len(grouped_shape)))
    n = count(grouped_shape, dims)
    mean = expand_reduced(prims.div(prims.sum(grouped, dims), n), grouped_shape, dims)
    centered = prims.sub(grouped, mean)
    variance = prims.div(prims.sum(prims.mul(centered, centered), dims), n)
    rstd = prims.rsqrt(prims.add(variance, eps))
    out = prims.reshape(prims.mul(centered, expand_reduced(rstd, grouped_shape, dims)), shape)
    if weight is not None:
        out = prims.mul(out, prims.broadcast_in_dim(to_dtype(weight, x.dtype), shape, [1]))
    if bias is not None:
        out = prims.add(out, prims.broadcast_in_dim(to_dtype(bias, x.dtype), shape, [1]))
    return to_dtype(out, input.dtype)


@register("torch.nn.functional.group_norm")
def group_norm(
    input: TensorProxy,
    num_groups: int,
    weight: TensorProxy | None = None,
    bias: TensorProxy | None = None,
    eps: float = 1e-5,
) -> TensorProxy:
    """F.group_norm (nn.GroupNorm's forward): see `_group_norm`; like eager, refuses an input with one
    value per group and channel (ValueError)."""
    _check_group_norm("group_norm", input, num_groups, weight, bias)
    per_channel = size_product([input.shape[0] * input.shape[1] // num_groups, *input.shape[2:]])
    check(
        not bool(per_channel == 1),
        lambda: (
            f"group_norm: expected more than 1 value per channel when training, got input size "
            f"{[input.shape[0] * input.shape[1] // num_groups, num_groups, *input.shape[2:]]}{called_at()}"
        ),
        ValueError,
    )
    return _group_norm(input, num_groups, weight, bias, eps)


@register("torch.group_norm")
def torch_group_norm(
    input: TensorProxy,
    num_groups: int,
    weight: TensorProxy | None = None,
    bias: TensorProxy | None = None,
    eps: float = 1e-5,
    cudnn_enabled: bool = True,
) -> TensorProxy:
    """torch.group_norm: see `_group_norm` (`cudnn_enabled` picks eager's kernel, not the result)."""
    _check_group_norm("group_norm", input, num_groups, weight, bias)
    return _group_norm(input, num_groups, weight, bias, eps)


@register("torch._weight_norm")
def weight_norm(v: TensorProxy, g: TensorProxy, dim: int = 0) -> TensorProxy:
    """torch._weight_norm (what `nn.utils.parametrizations.weight_norm` computes): v * (g / ||v||),
    the 2-norm taken over every dim but `dim` (over all of them for dim=-1), kept for broadcasting."""
    check(
        isinstance(v, TensorProxy) and isinstance(g, TensorProxy),
        lambda: f"torch._weight_norm: v and g must be tensors{called_at()}",
        TypeError,
    )
    kept = () if dim == -1 else (canonical_dim(dim, v.ndim),)
    dims = tuple(d for d in range(v.ndim) if d not in kept)
    magnitude = vector_norm_of("torch._weight_norm", v, 2, dims, True, None) if dims else elementwise(prims.abs, v)
    return elementwise(prims.mul, v, elementwise(prims.div, g, magnitude))
