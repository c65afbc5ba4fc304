"""Vector norms: linalg.vector_norm, torch.norm / Tensor.norm, F.normalize, cosine_similarity.

bf16/f16 inputs accumulate in float32 and round once to the input dtype (or `dtype=`). Where a norm
is zero, autodiff must give torch's gradient (0, not the 0 * inf = NaN of differentiating sqrt or
pow at 0): the root is taken of a safe value (`_safe_root`), and powers of zero elements too.
Matrix norms ("nuc", "fro" over more than two dims) are refused.
"""

from __future__ import annotations

import math
from typing import Any

from compiler import prims
from compiler.core import dtypes
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy
from compiler.ops.operands import Promotion, broadcast_shapes, broadcast_to, canonical_dim, result_dtypes, to_dtype
from compiler.ops.reductions import expand_reduced, keep_dims, reduce_dims
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
