"""Linear algebra: matmul (and @), bmm, mm, mv, dot, linear, bilinear, cross, and the scaled sums
addmm, addmv, addr, baddbmm, addbmm.

`prims.matmul` takes operands of one rank >= 2 with equal batch dims; `matmul` here does the rest
of torch's rules: 1-D operands gain (and lose) a dim, batch dims broadcast, and a batched left
operand times a matrix is folded into one matrix product, as torch does. Operands must share a
dtype (torch does not promote in matmul); products run in that dtype, so bf16 matches eager.

Imported by `compiler/ops/nn.py`, which registers it with the other nn ops.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch

from compiler import prims
from compiler.core import dtypes
from compiler.core.errors import called_at, check
from compiler.core.ir import TensorProxy, same_size, size_product
from compiler.ops.elementwise import add, mul
from compiler.ops.operands import Promotion, broadcast_shapes, broadcast_to, check_no_out, result_dtypes, to_dtype
from compiler.ops.registry import register


def _check_operands(op: str, a: Any, b: Any, ranks: tuple[int, ...] | None = None) -> None:
    for name, t in (("first", a), ("second", b)):
        check(
            isinstance(t, TensorProxy),
            lambda name=name, t=t: f"{op}: the {name} operand must be a tensor, got {type(t).__name__}{called_at()}",
            TypeError,
        )
        check(
            t.ndim >= 1 if ranks is None else t.ndim in ranks,
            lambda name=name, t=t: (
                f"{op}: the {name} operand has rank {t.ndim}; expected "
                f"{'at least 1' if ranks is None else ' or '.join(map(str, ranks))}{called_at()}"
            ),
            ValueError,
        )
    check(
        a.dtype == b.dtype,
        lambda: f"{op}: operands must share a dtype, got {a.dtype} and {b.dtype}{called_at()}",
        TypeError,
    )
    check(
        same_size(a.shape[-1], b.shape[-2] if b.ndim >= 2 else b.shape[0]),
        lambda: (
            f"{op}: shapes {tuple(a.shape)} and {tuple(b.shape)} cannot be multiplied: the inner sizes "
            f"differ{called_at()}"
        ),
        ValueError,
    )


def _matmul(a: TensorProxy, b: TensorProxy) -> TensorProxy:
    """torch.matmul's semantics on top of the same-rank `prims.matmul` (operands already checked)."""
    a_vector, b_vector = a.ndim == 1, b.ndim == 1
    a2 = prims.reshape(a, [1, a.shape[0]]) if a_vector else a
    b2 = prims.reshape(b, [b.shape[0], 1]) if b_vector else b
    if a2.ndim > 2 and b2.ndim == 2:
        # NOTE: fold the batch into rows: one (B*n, k) @ (k, m) product, as torch does.
        rows = prims.reshape(a2, [size_product(a2.shape[:-1]), a2.shape[-1]])
        out = prims.reshape(prims.matmul(rows, b2), [*a2.shape[:-1], b2.shape[-1]])
    else:
        batch = broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
        a3 = broadcast_to(a2, [*batch, *a2.shape[-2:]])
        b3 = broadcast_to(b2, [*batch, *b2.shape[-2:]])
        out = prims.matmul(a3, b3)
    squeezed = ([out.ndim - 2] if a_vector else []) + ([out.ndim - 1] if b_vector else [])
    return prims.squeeze(out, squeezed) if squeezed else out


@register("torch.matmul", "torch.Tensor.matmul", "torch.Tensor.__matmul__")
def matmul(input: TensorProxy, other: TensorProxy, *, out: Any = None) -> Any:
    """torch.matmul / @: 1-D operands, batch broadcasting, and batch folding as in torch."""
    check_no_out("torch.matmul", out)
    _check_operands("matmul", input, other)
    return _matmul(input, other)


@register("torch.Tensor.__rmatmul__")
def rmatmul(input: TensorProxy, other: TensorProxy) -> Any:
    """other @ input, for a proxy on the right of @."""
    return matmul(other, input)


@register("torch.mm", "torch.Tensor.mm")
def mm(input: TensorProxy, mat2: TensorProxy, *, out: Any = None) -> Any:
    """torch.mm: a product of two matrices."""
    check_no_out("torch.mm", out)
    _check_operands("mm", input, mat2, ranks=(2,))
    return prims.matmul(input, mat2)


@register("torch.bmm", "torch.Tensor.bmm")
def bmm(input: TensorProxy, mat2: TensorProxy, *, out: Any = None) -> Any:
    """torch.bmm: batched products of 3-D tensors with equal batch sizes (no broadcasting)."""
    check_no_out("torch.bmm", out)
    _check_batches("bmm", input, mat2)
    return prims.matmul(input, mat2)


def _check_batches(op: str, a: Any, b: Any) -> None:
    _check_operands(op, a, b, ranks=(3,))
    check(
        same_size(a.shape[0], b.shape[0]),
        lambda: f"{op}: batch sizes differ: {a.shape[0]} and {b.shape[0]} ({op} does not broadcast){called_at()}",
        ValueError,
    )


@register("torch.nn.functional.linear")
def linear(input: TensorProxy, weight: TensorProxy, bias: TensorProxy | None = None) -> Any:
    """input @ weight.T + bias (weight (out, in), or 1-D for a dot product)."""
    check(
        isinstance(weight, TensorProxy) and weight.ndim in (1, 2),
        lambda: f"linear: weight must be a 1-D or 2-D tensor, got {getattr(weight, 'shape', weight)}{called_at()}",
        ValueError,
    )
    if weight.ndim == 1:
        _check_operands("linear", input, weight)
        out = _matmul(input, weight)
        return out if bias is None else add(out, bias)
    check(
        isinstance(input, TensorProxy) and input.ndim >= 1 and same_size(input.shape[-1], weight.shape[1]),
        lambda: (
            f"linear: input of shape {getattr(input, 'shape', input)} does not match weight of shape "
            f"{tuple(weight.shape)}: the last dims differ{called_at()}"
        ),
        ValueError,
    )
    check(
        input.dtype == weight.dtype and (bias is None or (isinstance(bias, TensorProxy) and bias.dtype == input.dtype)),
        lambda: (
            f"linear: input, weight and bias must share a dtype, got {input.dtype}, {weight.dtype} and "
            f"{getattr(bias, 'dtype', bias)}{called_at()}"
        ),
        TypeError,
    )
    if bias is None or (bias.ndim == 1 and same_size(bias.shape[0], weight.shape[0])):
        return prims.linear(input, weight, bias)
    return add(prims.linear(input, weight, None), bias)


@register("torch.addmm", "torch.Tensor.addmm")
def addmm(input: Any, mat1: TensorProxy, mat2: TensorProxy, *, beta: Any = 1, alpha: Any = 1, out: Any = None) -> Any:
    """beta * input + alpha * (mat1 @ mat2), with input broadcast to the product's shape."""
    check_no_out("torch.addmm", out)
    return _scaled_sum(input, mm(mat1, mat2), beta, alpha)


@register("torch.mv", "torch.Tensor.mv")
def mv(input: TensorProxy, vec: TensorProxy, *, out: Any = None) -> Any:
    """torch.mv: a matrix times a vector."""
    check_no_out("torch.mv", out)
    check(
        getattr(input, "ndim", None) == 2 and getattr(vec, "ndim", None) == 1,
        lambda: (
            f"mv: expected a matrix and a vector, got shapes {getattr(input, 'shape', input)} and "
            f"{getattr(vec, 'shape', vec)}{called_at()}"
        ),
        ValueError,
    )
    _check_operands("mv", input, vec)
    return _matmul(input, vec)


@register("torch.dot", "torch.Tensor.dot", "torch.vdot", "torch.Tensor.vdot")
def dot(input: TensorProxy, other: TensorProxy, *, out: Any = None) -> Any:
    """torch.dot (and vdot, the same for real tensors): the sum of products of two 1-D tensors."""
    check_no_out("torch.dot", out)
    _check_operands("dot", input, other, ranks=(1,))
    return _matmul(input, other)


@register("torch.addmv", "torch.Tensor.addmv")
def addmv(input: Any, mat: TensorProxy, vec: TensorProxy, *, beta: Any = 1, alpha: Any = 1, out: Any = None) -> Any:
    """beta * input + alpha * (mat @ vec)."""
    check_no_out("torch.addmv", out)
    return _scaled_sum(input, mv(mat, vec), beta, alpha)


@register("torch.addr", "torch.Tensor.addr")
def addr(input: Any, vec1: TensorProxy, vec2: TensorProxy, *, beta: Any = 1, alpha: Any = 1, out: Any = None) -> Any:
    """beta * input + alpha * outer(vec1, vec2)."""
    check_no_out("torch.addr", out)
    compute, result = result_dtypes([vec1, vec2], Promotion.DEFAULT)  # NOTE: bf16 products in float32, as torch
    return _scaled_sum(input, outer(to_dtype(vec1, compute), to_dtype(vec2, compute)), beta, alpha, result)


@register("torch.baddbmm", "torch.Tensor.baddbmm")
def baddbmm(
    input: Any, batch1: TensorProxy, batch2: TensorProxy, *, beta: Any = 1, alpha: Any = 1, out: Any = None
) -> Any:
    """beta * input + alpha * bmm(batch1, batch2), input broadcast to the products' shape (the
    scores of attention with an additive bias, as Bloom and GPT-NeoX write them)."""
    check_no_out("torch.baddbmm", out)
    return _scaled_sum(input, bmm(batch1, batch2), beta, alpha)


@register("torch.addbmm", "torch.Tensor.addbmm")
def addbmm(
    input: Any, batch1: TensorProxy, batch2: TensorProxy, *, beta: Any = 1, alpha: Any = 1, out: Any = None
) -> Any:
    """beta * input + alpha * the sum over the batch of bmm(batch1, batch2): one (n, b*k) @ (b*k, m)
    product, so the batch is summed inside the matmul's accumulation, as torch does."""
    check_no_out("torch.addbmm", out)
    _check_batches("addbmm", batch1, batch2)
    batch, rows, inner = batch1.shape
    left = prims.reshape(prims.permute(batch1, [1, 0, 2]), [rows, size_product([batch, inner])])
    right = prims.reshape(batch2, [size_product([batch, inner]), batch2.shape[2]])
    return _scaled_sum(input, prims.matmul(left, right), beta, alpha)


@register("torch.outer", "torch.Tensor.outer", "torch.ger", "torch.Tensor.ger")
def outer(input: TensorProxy, vec2: TensorProxy, *, out: Any = None) -> Any:
    """torch.outer: input[i] * vec2[j] of two 1-D tensors (dtypes promoted as in mul)."""
    check_no_out("torch.outer", out)
    check(
        isinstance(input, TensorProxy) and isinstance(vec2, TensorProxy) and input.ndim == 1 and vec2.ndim == 1,
        lambda: (
            f"outer: expected two 1-D tensors, got shapes {getattr(input, 'shape', input)} and "
            f"{getattr(vec2, 'shape', vec2)}{called_at()}"
        ),
        ValueError,
    )
    return mul(prims.broadcast_in_dim(input, [input.shape[0], 1], [0]), vec2)


def _scaled_sum(
    input: Any, product: TensorProxy, beta: Any, alpha: Any, dtype: torch.dtype | None = None
) -> TensorProxy:
    """beta * input + alpha * product (addmm): scaled and added in float32 for bf16/f16,
    rounded once to `dtype` (default: the product's); input is ignored (NaN included) when beta is
    0, as torch does (it then gets no gradient, where eager gives it zeros)."""
    if not product.dtype.is_floating_point:  # NOTE: torch converts alpha and beta to the integer type
        alpha, beta = (int(x) if isinstance(x, float) else x for x in (alpha, beta))
    compute = dtypes.compute_dtype(product.dtype)  # scaled and added in float32, rounded once, as torch does
    scaled = to_dtype(product, compute)
    if not (isinstance(alpha, int) and alpha == 1):
        scaled = prims.mul(scaled, alpha)
    if not (isinstance(beta, (int, float)) and beta == 0):  # NOTE: torch ignores input (NaN included) when beta is 0
        term = to_dtype(broadcast_to(input, product.shape), compute)
        scaled = prims.add(scaled, term if isinstance(beta, int) and beta == 1 else prims.mul(term, beta))
    return to_dtype(scaled, product.dtype if dtype is None else dtype)


def _cross_product(a: TensorProxy, b: TensorProxy, dim: int) -> TensorProxy:
    """The vector product along `dim` (of size 3) of two broadcast tensors, each component eager's
    a[i] * b[j] - a[j] * b[i]."""
    a, b = torch.broadcast_tensors(a, b)
    a1, a2, a3 = a.unbind(dim)
    b1, b2, b3 = b.unbind(dim)
    return torch.stack([a2 * b3 - a3 * b2, a3 * b1 - a1 * b3, a1 * b2 - a2 * b1], dim)


def _check_cross(op: str, input: Any, other: Any, dim: int) -> None:
    check(
        isinstance(input, TensorProxy) and isinstance(other, TensorProxy) and input.ndim == other.ndim,
        lambda: (
            f"{op}: inputs dimension {getattr(input, 'ndim', input)} does not match other dimension "
            f"{getattr(other, 'ndim', other)}{called_at()}"
        ),
        RuntimeError,
    )
    check(
        input.shape[dim] == 3 and other.shape[dim] == 3,
        lambda: f"{op}: dimension {dim} does not have size 3{called_at()}",
        RuntimeError,
    )


@register("torch.linalg.cross")
def linalg_cross(input: TensorProxy, other: TensorProxy, *, dim: int = -1, out: Any = None) -> TensorProxy:
    """torch.linalg.cross: the vector product along `dim` (size 3), batch dims broadcast."""
    check_no_out("torch.linalg.cross", out)
    _check_cross("linalg.cross", input, other, dim)
    return _cross_product(input, other, dim)


@register("torch.cross", "torch.Tensor.cross")
def cross(input: TensorProxy, other: TensorProxy, dim: int | None = None, *, out: Any = None) -> TensorProxy:
    """torch.cross: linalg.cross, along the first dim of size 3 when `dim` is None (eager warns)."""
    check_no_out("torch.cross", out)
    if dim is None:
        sizes = [d for d, (a, b) in enumerate(zip(input.shape, other.shape)) if a == 3 and b == 3]
        check(bool(sizes), lambda: f"torch.cross: no dimension of size 3 in input{called_at()}", RuntimeError)
        warnings.warn(
            "Using torch.cross without specifying the dim arg is deprecated.\n"
            "Please either pass the dim explicitly or simply use torch.linalg.cross.\n"
            "The default value of dim will change to agree with that of linalg.cross in a future release.",
            stacklevel=3,
        )
        dim = sizes[0]
    _check_cross("cross", input, other, dim)
    return _cross_product(input, other, dim)


@register("torch.bilinear")
def bilinear(input1: TensorProxy, input2: TensorProxy, weight: TensorProxy, bias: Any = None) -> TensorProxy:
    """y[..., o] = sum_ij input1[..., i] weight[o, i, j] input2[..., j] (+ bias[o]): one matmul of
    input1 with the weight's (i, o * j) matrix, then a batched matmul with input2 (sums accumulate in
    float32 for bf16, as eager's)."""
    check(
        all(isinstance(t, TensorProxy) for t in (input1, input2, weight)) and weight.ndim == 3,
        lambda: f"bilinear: expected input1, input2 and a 3-d weight, got weight {weight!r}{called_at()}",
        RuntimeError,
    )
    check(
        input1.shape[:-1] == input2.shape[:-1]
        and input1.shape[-1] == weight.shape[1]
        and input2.shape[-1] == weight.shape[2],
        lambda: (
            f"bilinear: input1 {tuple(input1.shape)} and input2 {tuple(input2.shape)} must share batch dims and "
            f"match the weight {tuple(weight.shape)} in their last dims{called_at()}"
        ),
        RuntimeError,
    )
    outputs, left, right = weight.shape
    mixed = (input1 @ weight.permute(1, 0, 2).reshape(left, outputs * right)).unflatten(-1, (outputs, right))
    y = (mixed @ input2.unsqueeze(-1)).squeeze(-1)
    return y if bias is None else y + bias
